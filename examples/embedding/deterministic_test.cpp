// embedding_deterministic_test: a deterministic test of a host actor that trains through a
// session actor, on CAF's test scheduler (<actorflow/actors/testing.hpp>). The session runs an
// in-process cluster of one ps task, holding the variables, and one worker task computing the
// gradients. The same messages must come in the same order on every run, and the trace shows
// that order: what a test of an embedding application asserts.
// Exits 0 when both runs agree and the trace is the expected one; otherwise prints why, then
// both traces, and exits 1.
#include "session_steps.hpp"

#include <actorflow/actors/session_actor.hpp>
#include <actorflow/actors/testing.hpp>
#include <actorflow/graph/ops.hpp>
#include <actorflow/graph/optimizers.hpp>

#include <caf/all.hpp>

#include <chrono>
#include <cmath>
#include <csignal>
#include <future>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

using namespace actorflow;
using embedding::host_outcome;
using embedding::host_reply;

namespace {

/// y = 0.1 x + 0.3 with the variables on the ps and everything else on the worker.
struct linear_model {
  graph g;
  actorflow::variable w, b;
  output x, y, train, init;

  linear_model() {
    {
      auto on_ps = g.device("/job:ps/task:0");
      w = ops::variable(g, 0.f, "W");
      b = ops::variable(g, 0.f, "b");
    }
    auto on_worker = g.device("/job:worker/task:0");
    x = ops::placeholder(g, dtype::float32, {-1}, "x");
    y = ops::placeholder(g, dtype::float32, {-1}, "y");
    auto loss = ops::reduce_mean(ops::square(w * x + b - y), {}, false, "loss");
    train = gradient_descent_optimizer{0.5}.minimize(loss); // updates run beside W and b
    init = ops::global_variables_initializer(g);
  }
};

/// The host actor under test: one initializer step, one training step on fixed points, then
/// W and b.
void host_actor(caf::event_based_actor* self, protocol::session_actor session,
                std::shared_ptr<const linear_model> m, host_reply done) {
  feed_list batch{{m->x, tensor::from_vector<float>({0.f, 0.5f, 1.f})},
                  {m->y, tensor::from_vector<float>({0.3f, 0.35f, 0.4f})}};
  auto fetch = [=] {
    embedding::run_step(self, session, protocol::make_session_run({m->w.read, m->b.read}), done,
                        [=](std::vector<tensor>& wb) {
                          embedding::close_and_report(self, session, done,
                                                      {wb.at(0).scalar_value<float>(),
                                                       wb.at(1).scalar_value<float>()});
                        });
  };
  auto train = [=] {
    embedding::run_step(self, session, protocol::make_session_run({}, batch, {m->train}), done,
                        [=](std::vector<tensor>&) { fetch(); });
  };
  embedding::run_step(self, session, protocol::make_session_run({}, {}, {m->init}), done,
                      [=](std::vector<tensor>&) { train(); });
}

struct run_record {
  status error;
  std::vector<float> values;
  std::vector<std::string> trace;
};

/// One run on a fresh deterministic system: nothing runs until run_all(), which delivers every
/// message, one at a time, in a fixed order, on this thread.
run_record run_once() {
  testing::deterministic_system sys;
  session_options base;
  base.in_process_cluster = {{"ps", 1}, {"worker", 1}};
  auto model = std::make_shared<const linear_model>();
  // run_inline and one-thread pools: nodes run inside their device actors, on this thread.
  auto session = spawn_session(sys.system(), model->g, sys.session_options(base));
  if (!session)
    return {session.error(), {}, {}};
  auto done = std::make_shared<std::promise<host_outcome>>();
  auto reported = done->get_future();
  auto host = sys.system().spawn([=, s = *session](caf::event_based_actor* self) {
    host_actor(self, s, model, done);
  });
  sys.run_all();
  // No wall clock: once run_all() returns, the host actor has reported or never will (a
  // request waiting on a timeout fires only when the test triggers it).
  run_record record{{}, {}, sys.trace()};
  if (reported.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    record.error = make_error(errc::deadline_exceeded,
                              "the host actor had not reported when no message was left");
  } else {
    auto outcome = reported.get();
    record.error = outcome.error;
    record.values = outcome.values;
  }
  // The actor system's destructor waits for every actor, and only run_all() runs them: end
  // what a failure left behind (on success both have stopped already) and let the session's
  // master and tasks stop.
  caf::anon_send_exit(host, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(*session, caf::exit_reason::user_shutdown);
  sys.run_all();
  return record;
}

void print_trace(const std::string& title, const std::vector<std::string>& trace) {
  std::cerr << title << ":\n";
  for (auto& line : trace)
    std::cerr << "  " << line << '\n';
}

} // namespace

int main() {
  // A peer or pipe reader that goes away fails a write (EPIPE) instead of killing the program.
  std::signal(SIGPIPE, SIG_IGN);
  auto first = run_once();
  auto second = run_once();
  for (auto* r : {&first, &second})
    if (!r->error.ok()) {
      std::cerr << "embedding_deterministic_test: a run failed: " << r->error.to_string() << '\n';
      return 1;
    }
  // Trace lines name devices by their local name, and both tasks have "/device:CPU:0"; which
  // task each line comes from follows from the graph (noted on the right). The master registers
  // the ps's partition first (it keeps devices sorted by job and task) and closing the session
  // deregisters them in the same order.
  std::vector<std::string> expected{
    "/device:CPU:0 register 1",       // ps: step 1, the initializer, runs on the ps alone
    "/device:CPU:0 run step 1",       // ps
    "/device:CPU:0 finished step 1",  // ps
    "/device:CPU:0 register 2",       // ps: step 2, the updates of W and b
    "/device:CPU:0 register 3",       // worker: the loss and its gradients
    "/device:CPU:0 run step 2",       // ps: sends W/read and b/read, waits for the gradients
    "/device:CPU:0 run step 2",       // worker: waits for W and b
    "/device:CPU:0 tensor W/read:0 step 2",  // worker
    "/device:CPU:0 tensor b/read:0 step 2",  // worker: computes and sends the gradients
    "/device:CPU:0 finished step 2",  // worker
    "/device:CPU:0 tensor gradients/mul_grad/SumToShapeOf:0 step 2",    // ps
    "/device:CPU:0 tensor gradients/add_grad/SumToShapeOf_1:0 step 2",  // ps: updates W, b
    "/device:CPU:0 finished step 2",  // ps
    "/device:CPU:0 register 4",       // ps: step 3, reading W and b
    "/device:CPU:0 run step 3",       // ps
    "/device:CPU:0 finished step 3",  // ps
    "/device:CPU:0 deregister 4",     // ps: the host actor closed the session
    "/device:CPU:0 deregister 2",     // ps
    "/device:CPU:0 deregister 1",     // ps
    "/device:CPU:0 deregister 3",     // worker
  };
  bool same = first.trace == second.trace && first.values == second.values;
  bool as_expected = first.trace == expected;
  // One step of gradient descent at 0.5 from W = b = 0 on these points: W = 0.575 / 3 and
  // b = 0.35.
  bool trained = std::abs(first.values.at(0) - 0.575f / 3) < 1e-5f &&
                 std::abs(first.values.at(1) - 0.35f) < 1e-5f;
  if (!same || !as_expected || !trained) {
    std::cerr << "embedding_deterministic_test: "
              << (!same          ? "the two runs differ"
                  : !as_expected ? "the trace is not the expected one"
                                 : "W and b are not what one step gives")
              << " (W=" << first.values.at(0) << " b=" << first.values.at(1) << ")\n";
    print_trace("first run", first.trace);
    print_trace("second run", second.trace);
    print_trace("expected", expected);
    return 1;
  }
  std::cout << "embedding_deterministic_test: " << first.trace.size()
            << " traced messages in the same order on both runs; W=" << first.values.at(0)
            << " b=" << first.values.at(1) << '\n';
  return 0;
}
