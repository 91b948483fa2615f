// Collective schedules and their execution without any transport: N members' executions
// joined by a simulated network that delivers pieces in a shuffled order (fixed seed). Ring and
// halving-doubling give the exact sum (and mean, max, min) for 1..8 members, odd sizes,
// tensors smaller than the group, every dtype; every member ends with the same bits; the bytes
// sent are the algorithms' own; a ring's chunks pipeline; bad pieces are refused.
#include "devices/collective_execution.hpp"
#include "devices/collective_schedule.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <vector>

using namespace actorflow;

namespace {

/// Member r's input: small integers, so every sum is exact in float32 too.
template <class T>
T value_of(int rank, std::int64_t i) {
  return static_cast<T>((rank + 1) * ((i % 7) + 1) - 3 * (i % 2) - rank % 3);
}

template <class T>
tensor input_of(int rank, std::int64_t elements) {
  tensor t{dtype_of<T>(), tensor_shape{elements}};
  for (std::int64_t i = 0; i < elements; ++i)
    t.data<T>()[i] = value_of<T>(rank, i);
  return t;
}

template <class T>
T expected_element(reduction op, int size, std::int64_t i) {
  T acc = value_of<T>(0, i);
  for (int r = 1; r < size; ++r) {
    T v = value_of<T>(r, i);
    acc = op == reduction::max ? std::max(acc, v) : op == reduction::min ? std::min(acc, v) : acc + v;
  }
  if (op == reduction::mean)
    acc = static_cast<T>(acc / static_cast<T>(size));
  return acc;
}

struct in_flight {
  int from = 0;
  collective_piece piece;
};

/// Runs one execution per member, delivering pieces in an order drawn from `seed`, until
/// nothing is in flight. Returns the results by rank; fails the test on a refused piece.
std::vector<tensor> run_group(const std::vector<collective_schedule>& plans,
                              const std::vector<tensor>& buffers, reduction op,
                              std::uint32_t seed, std::uint64_t* bytes_moved = nullptr) {
  std::vector<collective_execution> runs;
  for (std::size_t r = 0; r < plans.size(); ++r)
    runs.emplace_back(plans[r], buffers[r].clone(), op);
  std::vector<in_flight> net;
  auto collect = [&](int r) {
    for (auto& p : runs[static_cast<std::size_t>(r)].take_sends()) {
      if (bytes_moved)
        *bytes_moved += p.value.bytes();
      net.push_back({r, std::move(p)});
    }
  };
  for (int r = 0; r < static_cast<int>(runs.size()); ++r)
    collect(r);
  std::mt19937 rng{seed};
  while (!net.empty()) {
    auto pick = std::uniform_int_distribution<std::size_t>{0, net.size() - 1}(rng);
    auto m = std::move(net[pick]);
    net.erase(net.begin() + static_cast<std::ptrdiff_t>(pick));
    auto& to = runs[static_cast<std::size_t>(m.piece.to)];
    auto s = to.receive(m.from, m.piece.tag, std::move(m.piece.value));
    INFO(s.to_string());
    REQUIRE(s.ok());
    collect(m.piece.to);
  }
  std::vector<tensor> out;
  for (auto& run : runs) {
    INFO("member " << run.schedule().rank << ": " << run.describe_wait());
    REQUIRE(run.finished());
    CHECK(run.awaited_members().empty());
    out.push_back(run.take_result());
  }
  return out;
}

template <class T>
void check_all_reduce(collective_algorithm algorithm, int size, std::int64_t elements,
                      std::int64_t chunk, reduction op, std::uint32_t seed) {
  INFO(to_string(algorithm) << ", " << size << " members, " << elements << " elements of "
                            << to_string(dtype_of<T>()) << ", chunks of " << chunk << ", "
                            << to_string(op) << ", seed " << seed);
  std::vector<collective_schedule> plans;
  std::vector<tensor> inputs;
  for (int r = 0; r < size; ++r) {
    plans.push_back(algorithm == collective_algorithm::ring
                      ? ring_all_reduce_schedule(r, size, elements, chunk)
                      : halving_doubling_all_reduce_schedule(r, size, elements, chunk));
    inputs.push_back(input_of<T>(r, elements));
  }
  std::uint64_t moved = 0;
  auto results = run_group(plans, inputs, op, seed, &moved);
  for (int r = 0; r < size; ++r) {
    auto& got = results[static_cast<std::size_t>(r)];
    REQUIRE(got.num_elements() == elements);
    for (std::int64_t i = 0; i < elements; ++i) {
      INFO("member " << r << ", element " << i);
      REQUIRE(got.data<T>()[i] == expected_element<T>(op, size, i));
    }
    // The same bits on every member (replicas must stay identical).
    CHECK(std::memcmp(got.raw_data(), results[0].raw_data(), got.bytes()) == 0);
  }
  // What the algorithms move in all: the ring 2 (n - 1) times the tensor; halving-doubling
  // 2 (p - 1) times it, plus the whole tensor twice per member folded in.
  int p = 1;
  while (p * 2 <= size)
    p *= 2;
  auto e = static_cast<std::uint64_t>(elements) * sizeof(T);
  auto want = algorithm == collective_algorithm::ring
                ? 2 * static_cast<std::uint64_t>(size - 1) * e
                : 2 * static_cast<std::uint64_t>(p - 1) * e + 2 * static_cast<std::uint64_t>(size - p) * e;
  CHECK(moved == want);
}

} // namespace

TEST_CASE("ring and halving-doubling all-reduces give the exact sum for 1 to 8 members and odd or tiny sizes") {
  auto algorithm = GENERATE(collective_algorithm::ring, collective_algorithm::halving_doubling);
  for (int size = 1; size <= 8; ++size)
    for (std::int64_t elements : {0, 1, 2, 3, 5, 7, 8, 13, 100, 1001})
      for (std::int64_t chunk : {1, 3, 1 << 20}) {
        auto seed = static_cast<std::uint32_t>(size * 1000 + elements * 10 + chunk % 7);
        check_all_reduce<float>(algorithm, size, elements, chunk, reduction::sum, seed);
      }
}

TEST_CASE("all-reduces of every dtype give the exact sum, mean, max and min") {
  auto algorithm = GENERATE(collective_algorithm::ring, collective_algorithm::halving_doubling);
  for (int size : {2, 3, 5, 8})
    for (auto op : {reduction::sum, reduction::mean, reduction::max, reduction::min})
      for (std::int64_t elements : {3, 37}) {
        auto seed = static_cast<std::uint32_t>(size * 97 + static_cast<int>(op) * 13 + elements);
        check_all_reduce<float>(algorithm, size, elements, 4, op, seed);
        check_all_reduce<double>(algorithm, size, elements, 4, op, seed);
        check_all_reduce<std::int32_t>(algorithm, size, elements, 4, op, seed);
        check_all_reduce<std::int64_t>(algorithm, size, elements, 4, op, seed);
      }
}

TEST_CASE("a ring's next round leaves chunk by chunk while later chunks of the round before are still on their way") {
  // Member 1 of 3, 6 elements in segments of 2, chunks of 1: round 0 receives segment 0 from
  // member 0 in two chunks; round 1 sends that segment on to member 2.
  auto plan = ring_all_reduce_schedule(1, 3, 6, 1);
  collective_execution run{plan, input_of<float>(1, 6), reduction::sum};
  auto first = run.take_sends();
  REQUIRE(first.size() == 2); // round 0: segment 1's two chunks, waiting for nothing
  for (auto& p : first)
    CHECK(p.to == 2);
  // Chunk 0 of round 0 arrives: round 1's chunk 0 (the sum just made) may go, chunk 1 not yet.
  tensor piece{dtype::float32, {1}};
  piece.data<float>()[0] = 100.f;
  REQUIRE(run.receive(0, (std::int64_t{0} << 24) | 0, piece).ok());
  auto next = run.take_sends();
  REQUIRE(next.size() == 1);
  CHECK(next[0].to == 2);
  CHECK(next[0].tag == ((std::int64_t{1} << 24) | 0));
  CHECK(next[0].value.data<float>()[0] == 100.f + input_of<float>(1, 6).data<float>()[0]);
  CHECK(run.describe_wait() == "the reduce-scatter (round 0) waits for member 0");
  CHECK(run.awaited_members() == std::vector<int>{0}); // a ring member hears only from its left
}

TEST_CASE("a piece that arrives before its turn waits until the range it overwrites has been sent on") {
  // Member 0 of a ring of 3, one element per segment: round 0 reduces member 2's piece into
  // element 2 and round 1 sends that sum on; round 3 (the all-gather) overwrites element 2.
  // Round 3's piece comes first: it must not land before round 1 has sent the sum.
  auto plan = ring_all_reduce_schedule(0, 3, 3, 16);
  collective_execution run{plan, tensor::from_vector<float>({1, 2, 3}), reduction::sum};
  REQUIRE(run.take_sends().size() == 1); // round 0: element 0 to member 1
  REQUIRE(run.receive(2, std::int64_t{3} << 24, tensor::from_vector<float>({99})).ok());
  CHECK(run.take_sends().empty());
  REQUIRE(run.receive(2, std::int64_t{0} << 24, tensor::from_vector<float>({10})).ok());
  auto sent = run.take_sends();
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].tag == std::int64_t{1} << 24);
  CHECK(sent[0].value.to_vector<float>() == std::vector<float>{13});
  CHECK(run.describe_wait() == "the reduce-scatter (round 1) waits for member 2");
}

TEST_CASE("pieces a member does not expect, twice, or of the wrong size or dtype are refused") {
  auto plan = ring_all_reduce_schedule(0, 2, 4, 16);
  collective_execution run{plan, tensor::from_vector<float>({1, 2, 3, 4}), reduction::sum};
  auto unknown = run.receive(1, std::int64_t{9} << 24, tensor::from_vector<float>({1, 2}));
  CHECK(unknown.code() == errc::data_loss);
  CHECK(unknown.message().find("expects no such piece") != std::string::npos);
  auto short_piece = run.receive(1, 0, tensor::from_vector<float>({1}));
  CHECK(short_piece.code() == errc::data_loss);
  auto wrong_type = run.receive(1, 0, tensor::from_vector<std::int32_t>({1, 2}));
  CHECK(wrong_type.code() == errc::data_loss);
  REQUIRE(run.receive(1, 0, tensor::from_vector<float>({5, 6})).ok());
  auto twice = run.receive(1, 0, tensor::from_vector<float>({5, 6}));
  CHECK(twice.code() == errc::data_loss);
  CHECK(twice.message().find("came twice") != std::string::npos);
}

TEST_CASE("a tree broadcast gives every member the root's tensor and an all-gather every member's in rank order") {
  for (int size = 1; size <= 8; ++size)
    for (int root : {0, size - 1, size / 2})
      for (std::int64_t elements : {1, 5, 64}) {
        INFO(size << " members, root " << root << ", " << elements << " elements");
        std::vector<collective_schedule> plans;
        std::vector<tensor> buffers;
        for (int r = 0; r < size; ++r) {
          plans.push_back(tree_broadcast_schedule(r, size, root, elements, 3));
          buffers.push_back(r == root ? input_of<std::int64_t>(r, elements)
                                      : tensor{dtype::int64, tensor_shape{elements}});
        }
        auto got = run_group(plans, buffers, reduction::sum, static_cast<std::uint32_t>(size + root));
        for (auto& t : got)
          CHECK(t.to_vector<std::int64_t>() == input_of<std::int64_t>(root, elements).to_vector<std::int64_t>());
      }
  for (int size = 1; size <= 8; ++size)
    for (std::int64_t per : {1, 4, 9}) {
      INFO(size << " members, " << per << " elements each");
      std::vector<collective_schedule> plans;
      std::vector<tensor> buffers;
      std::vector<double> want;
      for (int r = 0; r < size; ++r) {
        plans.push_back(ring_all_gather_schedule(r, size, per, 2));
        tensor buffer{dtype::float64, tensor_shape{per * size}};
        auto own = input_of<double>(r, per).to_vector<double>();
        std::memcpy(buffer.data<double>() + per * r, own.data(), own.size() * sizeof(double));
        buffers.push_back(buffer);
        want.insert(want.end(), own.begin(), own.end());
      }
      for (auto& t : run_group(plans, buffers, reduction::sum, static_cast<std::uint32_t>(size * 7 + per)))
        CHECK(t.to_vector<double>() == want);
    }
}

TEST_CASE("an all-reduce takes halving-doubling below the ring's threshold and the ring above it, unless told") {
  collective_tuning tuning;
  tuning.ring_min_bytes = 1024;
  CHECK(choose_all_reduce_algorithm(1023, 4, tuning) == collective_algorithm::halving_doubling);
  CHECK(choose_all_reduce_algorithm(1024, 4, tuning) == collective_algorithm::ring);
  tuning.algorithm = collective_algorithm::halving_doubling;
  CHECK(choose_all_reduce_algorithm(std::size_t{1} << 30, 4, tuning) ==
        collective_algorithm::halving_doubling);
  tuning.algorithm = collective_algorithm::automatic;
  tuning.chunk_bytes = 8; // two float32 elements per piece
  auto big = make_collective_schedule(collective_kind::all_reduce, 0, 4, 1000, 4, tuning);
  CHECK(big.algorithm == collective_algorithm::ring);
  for (auto& a : big.actions)
    CHECK(a.range.size() <= 2);
  auto small = make_collective_schedule(collective_kind::all_reduce, 0, 4, 10, 4, tuning);
  CHECK(small.algorithm == collective_algorithm::halving_doubling);
  CHECK(parse_collective_algorithm("ring") == collective_algorithm::ring);
  CHECK(parse_collective_algorithm("halving-doubling") == collective_algorithm::halving_doubling);
  CHECK_FALSE(parse_collective_algorithm("tree"));
  CHECK(parse_reduction("mean") == reduction::mean);
}
