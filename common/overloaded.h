#pragma once

namespace trellis {

// std::visit over a variant with one lambda per alternative:
//   std::visit(Overloaded{[](const A&) {...}, [](const B&) {...}}, v);
template <typename... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <typename... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace trellis
