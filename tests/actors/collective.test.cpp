// Collective members (actors/collective.hpp) on CAF's test scheduler, driven by plain CAF
// actors as an embedding program would: ring and halving-doubling all-reduces give the exact
// sum for 1..8 members, odd and tiny sizes, float and integer types; broadcast and all-gather;
// a member lost at any point of either algorithm fails every other member at once, naming the
// lost task; a member whose request never comes makes the others fail at their bound, and its
// own late request fails at once.
#include "actors/collective.hpp"
#include "actors/protocols/wire.hpp"
#include "actors/testing.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

using namespace actorflow;
using namespace std::chrono_literals;

namespace {

template <class T>
T value_of(int rank, std::int64_t i) {
  return static_cast<T>((rank + 1) * ((i % 5) + 1) - 2 * (i % 3) - rank % 2);
}

template <class T>
tensor input_of(int rank, std::int64_t elements) {
  tensor t{dtype_of<T>(), tensor_shape{elements}};
  for (std::int64_t i = 0; i < elements; ++i)
    t.data<T>()[i] = value_of<T>(rank, i);
  return t;
}

/// A group of `size` fresh members (tasks 0..size-1 of job "worker") in `sys`, told their
/// group; each collective's answers land in `answers` by rank, through one plain CAF actor per
/// request.
struct test_group {
  testing::deterministic_system& sys;
  std::int64_t key;
  std::vector<protocol::collective_actor> members;
  protocol::collective_group group;
  std::shared_ptr<std::vector<std::optional<result<tensor>>>> answers;
  std::shared_ptr<std::vector<std::string>> trace = std::make_shared<std::vector<std::string>>();
  std::vector<caf::actor> clients;

  test_group(testing::deterministic_system& system, int size, std::int64_t group_key)
    : sys(system), key(group_key) {
    std::vector<protocol::collective_member_info> infos;
    for (int r = 0; r < size; ++r) {
      collective_member_options options;
      options.job = "worker";
      options.task = r;
      options.incarnation = 100 + static_cast<std::uint64_t>(r);
      auto lines = trace;
      options.trace = [lines](const std::string& line) { lines->push_back(line); };
      members.push_back(spawn_collective_member(sys.system(), options));
      infos.push_back(collective_member_of(members.back(), options));
    }
    group = protocol::make_collective_group(key, infos);
    auto ranks = std::make_shared<std::vector<std::int32_t>>();
    for (auto& m : members)
      sys.system().spawn([m, ranks, g = group](caf::event_based_actor* self) {
        self->request(m, caf::infinite, protocol::group_atom::value, g)
          .then([=](std::int32_t rank) { ranks->push_back(rank); });
      });
    sys.run_all();
    REQUIRE(ranks->size() == members.size());
  }

  ~test_group() {
    // Clients still waiting (a lost member's) go, then the members.
    for (auto& c : clients)
      caf::anon_send_exit(c, caf::exit_reason::kill);
    for (auto& m : members)
      caf::anon_send_exit(m, caf::exit_reason::kill);
    sys.run_all();
  }

  /// Sends member r its request (from a client actor of its own), runs nothing.
  void request(int r, protocol::collective_request req) {
    auto out = answers;
    auto member = members[static_cast<std::size_t>(r)];
    clients.push_back(sys.system().spawn([=](caf::event_based_actor* self) {
      self->request(member, caf::infinite, protocol::collective_atom::value, req)
        .then([=](tensor& t) { (*out)[static_cast<std::size_t>(r)] = t; },
              [=](caf::error& e) { (*out)[static_cast<std::size_t>(r)] = status_from_error(e); });
    }));
  }

  /// Requests `make(r)` on every member; runs nothing.
  template <class Make>
  void begin(Make make) {
    answers = std::make_shared<std::vector<std::optional<result<tensor>>>>(members.size());
    for (int r = 0; r < static_cast<int>(members.size()); ++r)
      request(r, make(r));
  }

  /// `make(r)` on every member, run until quiet; every answer.
  template <class Make>
  std::vector<result<tensor>> run(Make make) {
    begin(make);
    sys.run_all();
    std::vector<result<tensor>> out;
    for (auto& a : *answers) {
      REQUIRE(a.has_value());
      out.push_back(*a);
    }
    return out;
  }
};

template <class T>
void check_sum(testing::deterministic_system& sys, collective_algorithm algorithm, int size,
               std::int64_t elements, std::int64_t& key) {
  INFO(to_string(algorithm) << ", " << size << " members, " << elements << " "
                            << to_string(dtype_of<T>()));
  test_group g{sys, size, ++key};
  collective_tuning tuning;
  tuning.algorithm = algorithm;
  tuning.chunk_bytes = 3 * sizeof(T); // several pieces per segment
  // Two instances in a row on the same group: keys keep them apart.
  for (std::int64_t instance : {1, 2}) {
    auto got = g.run([&](int r) {
      return protocol::make_all_reduce(g.key, instance, input_of<T>(r, elements), reduction::sum,
                                       tuning);
    });
    for (int r = 0; r < size; ++r) {
      auto& t = got[static_cast<std::size_t>(r)];
      INFO("member " << r << ": " << t.error().to_string());
      REQUIRE(t.ok());
      REQUIRE(t->shape() == tensor_shape{elements});
      for (std::int64_t i = 0; i < elements; ++i) {
        T want = 0;
        for (int m = 0; m < size; ++m)
          want += value_of<T>(m, i);
        REQUIRE(t->template data<T>()[i] == want);
      }
    }
  }
}

} // namespace

TEST_CASE("collective members give the exact sum by ring and by halving-doubling for 1 to 8 members, odd and tiny sizes, float and integer types") {
  testing::deterministic_system sys;
  std::int64_t key = 0;
  for (auto algorithm : {collective_algorithm::ring, collective_algorithm::halving_doubling})
    for (int size = 1; size <= 8; ++size)
      for (std::int64_t elements : {1, 3, 7, 130}) {
        check_sum<float>(sys, algorithm, size, elements, key);
        check_sum<std::int64_t>(sys, algorithm, size, elements, key);
      }
  CHECK(sys.run_all() == 0);
}

TEST_CASE("collective members reduce by mean, max and min, broadcast from a root and gather every member's tensor") {
  testing::deterministic_system sys;
  test_group g{sys, 3, 7};
  auto shaped = [](tensor t) { return *t.reshaped(tensor_shape{2, 2}); };
  auto mean = g.run([&](int r) {
    return protocol::make_all_reduce(7, 1, shaped(input_of<double>(r, 4)), reduction::mean);
  });
  for (auto& t : mean) {
    REQUIRE(t.ok());
    CHECK(t->shape() == tensor_shape{2, 2});
    for (std::int64_t i = 0; i < 4; ++i)
      CHECK(t->data<double>()[i] ==
            (value_of<double>(0, i) + value_of<double>(1, i) + value_of<double>(2, i)) / 3);
  }
  auto max = g.run([&](int r) {
    return protocol::make_all_reduce(7, 2, input_of<std::int32_t>(r, 5), reduction::max);
  });
  auto min = g.run([&](int r) {
    return protocol::make_all_reduce(7, 3, input_of<std::int32_t>(r, 5), reduction::min);
  });
  for (std::int64_t i = 0; i < 5; ++i) {
    auto a = value_of<std::int32_t>(0, i), b = value_of<std::int32_t>(1, i),
         c = value_of<std::int32_t>(2, i);
    for (int r = 0; r < 3; ++r) {
      CHECK(max[static_cast<std::size_t>(r)]->data<std::int32_t>()[i] == std::max({a, b, c}));
      CHECK(min[static_cast<std::size_t>(r)]->data<std::int32_t>()[i] == std::min({a, b, c}));
    }
  }
  auto broadcast = g.run([&](int r) {
    return protocol::make_broadcast(7, 4, 1, r == 1 ? input_of<float>(1, 6) : tensor{dtype::float32, {6}});
  });
  for (auto& t : broadcast)
    CHECK(t->to_vector<float>() == input_of<float>(1, 6).to_vector<float>());
  auto gathered = g.run([&](int r) {
    return protocol::make_all_gather(7, 5, shaped(input_of<float>(r, 4)));
  });
  std::vector<float> want;
  for (int r = 0; r < 3; ++r)
    for (auto v : input_of<float>(r, 4).to_vector<float>())
      want.push_back(v);
  for (auto& t : gathered) {
    REQUIRE(t.ok());
    CHECK(t->shape() == tensor_shape{6, 2});
    CHECK(t->to_vector<float>() == want);
  }
}

TEST_CASE("a collective member lost at any point of a ring or halving-doubling all-reduce fails every other member at once naming the lost task") {
  testing::deterministic_system sys;
  std::int64_t key = 100;
  struct trial_shape {
    collective_algorithm algorithm;
    int size;
    std::set<std::string> phases;
  };
  for (auto shape : {trial_shape{collective_algorithm::ring, 4, {"reduce-scatter", "all-gather"}},
                     trial_shape{collective_algorithm::halving_doubling, 5,
                                 {"fold-in", "reduce-scatter", "all-gather", "fold-out"}}}) {
    INFO(to_string(shape.algorithm) << " of " << shape.size);
    collective_tuning tuning;
    tuning.algorithm = shape.algorithm;
    tuning.chunk_bytes = 8;
    auto request = [&](std::int64_t group_key) {
      return [=](int r) {
        return protocol::make_all_reduce(group_key, 1, input_of<float>(r, 11), reduction::sum, tuning);
      };
    };
    // How many scheduler jobs the whole collective takes when nobody is lost.
    std::size_t jobs = 0;
    {
      test_group g{sys, shape.size, ++key};
      g.begin(request(g.key));
      jobs = sys.run_all();
    }
    std::set<std::string> phases_failed;
    for (int victim = 0; victim < shape.size; ++victim)
      for (std::size_t after = 0; after <= jobs; ++after) {
        INFO("member " << victim << " lost after " << after << " of " << jobs << " jobs");
        test_group g{sys, shape.size, ++key};
        g.begin(request(g.key));
        for (std::size_t j = 0; j < after; ++j)
          sys.scheduler().try_run_once();
        caf::anon_send_exit(g.members[static_cast<std::size_t>(victim)], caf::exit_reason::kill);
        sys.run_all(); // no timeout fires: the others learn of the loss, they do not wait it out
        for (int r = 0; r < shape.size; ++r) {
          if (r == victim)
            continue;
          auto& answer = (*g.answers)[static_cast<std::size_t>(r)];
          INFO("member " << r);
          REQUIRE(answer.has_value());
          if (answer->ok())
            continue; // it had all it needed before the loss
          auto why = answer->error();
          INFO(why.to_string());
          CHECK(why.code() == errc::unavailable);
          REQUIRE(why.origin());
          CHECK(why.origin()->name() == "/job:worker/replica:0/task:" + std::to_string(victim));
          CHECK(why.origin()->incarnation == 100 + static_cast<std::uint64_t>(victim));
          CHECK(why.message().find("member " + std::to_string(victim) + " (/job:worker/replica:0/task:" +
                                   std::to_string(victim) + "/device:CPU:0) was lost") !=
                std::string::npos);
          for (auto& phase : shape.phases)
            if (why.message().find("while the " + phase + " ") != std::string::npos)
              phases_failed.insert(phase);
        }
      }
    // The losses above hit members waiting in every phase of the algorithm.
    CHECK(phases_failed == shape.phases);
  }
}

TEST_CASE("a collective started after a member was lost fails at once with the words of one that was waiting") {
  // Between two collectives the loss finds nothing running: the group breaks, and the next
  // request must name the lost member as a waiting one would (a process's log is read by both).
  testing::deterministic_system sys;
  test_group g{sys, 3, 21};
  auto first = g.run([&](int r) { return protocol::make_all_reduce(g.key, 1, input_of<float>(r, 5)); });
  for (auto& t : first)
    REQUIRE(t.ok());
  caf::anon_send_exit(g.members[1], caf::exit_reason::kill);
  sys.run_all();
  g.answers = std::make_shared<std::vector<std::optional<result<tensor>>>>(3);
  for (int r : {0, 2})
    g.request(r, protocol::make_all_reduce(g.key, 2, input_of<float>(r, 5)));
  sys.run_all();
  for (int r : {0, 2}) {
    auto& answer = (*g.answers)[static_cast<std::size_t>(r)];
    INFO("member " << r);
    REQUIRE(answer.has_value());
    REQUIRE_FALSE(answer->ok());
    auto why = answer->error();
    INFO(why.to_string());
    CHECK(why.code() == errc::unavailable);
    CHECK(why.message().find("member 1 (/job:worker/replica:0/task:1/device:CPU:0) was lost") !=
          std::string::npos);
    REQUIRE(why.origin());
    CHECK(why.origin()->name() == "/job:worker/replica:0/task:1");
  }
}

TEST_CASE("a collective member whose request never comes fails the others at their bound, and its own late request at once") {
  testing::deterministic_system sys;
  test_group g{sys, 3, 9};
  g.answers = std::make_shared<std::vector<std::optional<result<tensor>>>>(3);
  for (int r : {0, 1})
    g.request(r, protocol::make_all_reduce(9, 1, input_of<float>(r, 6), reduction::sum, {}, 5000));
  sys.run_all();
  CHECK_FALSE((*g.answers)[0].has_value());
  CHECK_FALSE((*g.answers)[1].has_value());
  sys.scheduler().trigger_timeouts();
  sys.run_all();
  bool named = false;
  for (int r : {0, 1}) {
    auto& answer = (*g.answers)[static_cast<std::size_t>(r)];
    REQUIRE(answer.has_value());
    REQUIRE_FALSE(answer->ok());
    INFO(answer->error().to_string());
    CHECK(answer->error().code() == errc::deadline_exceeded);
    named = named || answer->error().message().find("/job:worker/replica:0/task:2/device:CPU:0") !=
                       std::string::npos;
  }
  CHECK(named);
  // Member 2 was told of the failure before its request: the request fails without waiting.
  g.request(2, protocol::make_all_reduce(9, 1, input_of<float>(2, 6)));
  sys.run_all();
  auto& late = (*g.answers)[2];
  REQUIRE(late.has_value());
  REQUIRE_FALSE(late->ok());
  CHECK(late->error().code() == errc::deadline_exceeded);
}

TEST_CASE("collective members refuse a group that does not list them, unknown groups, an instance started twice and booleans") {
  testing::deterministic_system sys;
  test_group g{sys, 2, 3};
  collective_member_options outside;
  outside.job = "worker";
  outside.task = 5;
  auto stranger = spawn_collective_member(sys.system(), outside);
  auto answers = std::make_shared<std::vector<status>>();
  auto settle = [&] {
    sys.run_all();
    REQUIRE(!answers->empty());
    auto s = answers->back();
    answers->clear();
    return s;
  };
  auto join = [&](protocol::collective_actor handle, protocol::collective_group group) {
    sys.system().spawn([=](caf::event_based_actor* self) {
      self->request(handle, caf::infinite, protocol::group_atom::value, group)
        .then([=](std::int32_t) { answers->push_back(status{}); },
              [=](caf::error& e) { answers->push_back(status_from_error(e)); });
    });
    return settle();
  };
  auto collect = [&](protocol::collective_actor handle, protocol::collective_request req) {
    sys.system().spawn([=](caf::event_based_actor* self) {
      self->request(handle, caf::infinite, protocol::collective_atom::value, req)
        .then([=](tensor&) { answers->push_back(status{}); },
              [=](caf::error& e) { answers->push_back(status_from_error(e)); });
    });
    return settle();
  };
  CHECK(join(stranger, g.group).code() == errc::invalid_argument);
  CHECK(collect(g.members[0], protocol::make_all_reduce(99, 1, input_of<float>(0, 2))).code() ==
        errc::failed_precondition);
  auto booleans = tensor::from_vector<bool>({true, false});
  auto refused = collect(g.members[0], protocol::make_all_reduce(3, 1, booleans));
  CHECK(refused.code() == errc::invalid_argument);
  CHECK(refused.message().find("bool is not reduced") != std::string::npos);
  // Member 1 was told to give up instance 1 too; instance 2 runs on member 0 and cannot again.
  g.answers = std::make_shared<std::vector<std::optional<result<tensor>>>>(2);
  g.request(0, protocol::make_all_reduce(3, 2, input_of<float>(0, 2)));
  sys.run_all();
  CHECK(collect(g.members[0], protocol::make_all_reduce(3, 2, input_of<float>(0, 2))).code() ==
        errc::already_exists);
  CHECK(collect(g.members[1], protocol::make_all_reduce(3, 1, input_of<float>(1, 2))).code() ==
        errc::invalid_argument);
  g.request(1, protocol::make_all_reduce(3, 2, input_of<float>(1, 2)));
  sys.run_all();
  REQUIRE((*g.answers)[0].has_value());
  CHECK((*g.answers)[0]->ok());
  caf::anon_send_exit(stranger, caf::exit_reason::kill);
  sys.run_all();
}

TEST_CASE("collective frame keys for the bulk channel read back as the piece they stand for and malformed ones are refused") {
  auto key = protocol::collective_frame_key(7, 42, 3, (std::int64_t{5} << 24) | 9);
  CHECK(key == "coll;7;42;3;83886089");
  auto piece = protocol::parse_collective_frame_key(key);
  REQUIRE(piece);
  CHECK(piece->group_key == 7);
  CHECK(piece->instance_key == 42);
  CHECK(piece->from == 3);
  CHECK(piece->tag == ((std::int64_t{5} << 24) | 9));
  for (std::string bad : {"coll;7;42;3", "coll;7;42;;1", "coll;7;x;3;1", "shard;7;42;3;1",
                          "coll;7;42;3;1;", "coll;99999999999999999999;1;1;1"})
    CHECK_FALSE(protocol::parse_collective_frame_key(bad));
}
