// How a tensor travels, decided in one place: by reference in a process, and across processes
// in one message, in chunks over the message cap, or over the receiver's bulk channel.
#include "actors/tensor_route.hpp"

#include <catch2/catch.hpp>

using namespace actorflow;

TEST_CASE("a tensor's route follows process, endpoint and size", "[actors][route]") {
  auto big = bulk_min_bytes();
  auto over_cap = wire_chunk_bytes() + 1;
  // In a process nothing is encoded, whatever the size or endpoint.
  CHECK(choose_tensor_route({true, true, "h:1", over_cap}) == tensor_route::in_process);
  // Across: large tensors to a task with an endpoint take the bulk channel.
  CHECK(choose_tensor_route({false, true, "h:1", big}) == tensor_route::bulk);
  CHECK(choose_tensor_route({false, true, "h:1", over_cap}) == tensor_route::bulk);
  // Small ones, and any without an endpoint or a sender, go through CAF.
  CHECK(choose_tensor_route({false, true, "h:1", big - 1}) == tensor_route::message);
  CHECK(choose_tensor_route({false, true, "", big}) == tensor_route::message);
  CHECK(choose_tensor_route({false, false, "h:1", big}) == tensor_route::message);
  // Over the per-message cap without the bulk channel: chunks.
  CHECK(choose_tensor_route({false, true, "", over_cap}) == tensor_route::chunks);
  CHECK(choose_tensor_route({false, false, "h:1", over_cap}) == tensor_route::chunks);
}
