// Builds c = 3 * 4 with the installed headers and runs it in a session: prints
// "actorflow consumer: c = 12" and exits 0, or says what went wrong and exits 1.
#include <actorflow/actors/session.hpp>
#include <actorflow/graph/graph.hpp>
#include <actorflow/graph/ops.hpp>

#include <iostream>

int main() {
  using namespace actorflow;
  graph g;
  auto a = ops::constant(g, 3.f, "a");
  auto b = ops::constant(g, 4.f, "b");
  auto c = a * b;

  session s{g};
  auto r = s.run({c});
  if (!r) {
    std::cerr << "actorflow consumer: run failed: " << r.error().to_string() << '\n';
    return 1;
  }
  if (r->size() != 1) {
    std::cerr << "actorflow consumer: expected 1 fetched tensor, got " << r->size() << '\n';
    return 1;
  }
  const float value = r->at(0).scalar_value<float>();
  std::cout << "actorflow consumer: c = " << value << '\n';
  return value == 12.f ? 0 : 1;
}
