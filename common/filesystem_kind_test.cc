#include "common/filesystem_kind.h"

#include <gtest/gtest.h>

namespace trellis {
namespace {

TEST(FilesystemKindTest, NetworkFilesystemsAreToldFromLocalOnes) {
  EXPECT_EQ(ClassifyFilesystem(0x6969).name, "nfs");
  EXPECT_TRUE(ClassifyFilesystem(0x6969).network);
  EXPECT_TRUE(ClassifyFilesystem(0x0BD00BD0).network);  // lustre
  EXPECT_TRUE(ClassifyFilesystem(0x47504653).network);  // gpfs
  EXPECT_FALSE(ClassifyFilesystem(0xEF53).network);     // ext2/3/4
  EXPECT_FALSE(ClassifyFilesystem(0x58465342).network);  // xfs
  EXPECT_EQ(ClassifyFilesystem(0x1234).name, "0x1234");  // unknown: taken as local
  EXPECT_FALSE(ClassifyFilesystem(0x1234).network);
}

TEST(FilesystemKindTest, APathNotMadeYetIsItsDirectorys) {
  auto tmp = FilesystemOf("/tmp");
  ASSERT_TRUE(tmp.ok()) << tmp.status();
  auto file = FilesystemOf("/tmp/no-such-file-yet.db");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->name, tmp->name);
  EXPECT_EQ(FilesystemOf("/no/such/dir/x.db").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace trellis
