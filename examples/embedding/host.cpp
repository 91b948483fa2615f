// embedding_host: a CAF application that runs actorflow inside its own actor system.
//   1. It starts a one-task local server (tf.train.Server) in its actor system.
//   2. One of its event-based actors trains y = 0.1 x + 0.3 through a session actor on the
//      server's target, one request at a time: no thread is ever blocked on a step.
//   3. A second actor opens another session on the same task, over a graph that declares the
//      same variable: it pulls the trained W, pushes 0.5 into it and reads it back. The task
//      keeps its variables across sessions (as TensorFlow servers do), found by name.
// Prints "trained W=<w> b=<b>", "pulled W=<w>" and "pushed W=0.5 read back <w>", and exits 0
// when the values are right; otherwise it prints what went wrong and exits 1.
#include "session_steps.hpp"

#include <actorflow/actors/protocols/wire.hpp>
#include <actorflow/actors/server.hpp>
#include <actorflow/actors/session_actor.hpp>
#include <actorflow/graph/ops.hpp>
#include <actorflow/graph/optimizers.hpp>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <chrono>
#include <cmath>
#include <csignal>
#include <functional>
#include <future>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace actorflow;
using embedding::host_outcome;
using embedding::host_reply;

namespace {

/// y = 0.1 x + 0.3 learned by gradient descent (TensorFlow's first example).
struct linear_model {
  graph g;
  output x = ops::placeholder(g, dtype::float32, {-1}, "x");
  output y = ops::placeholder(g, dtype::float32, {-1}, "y");
  actorflow::variable w = ops::variable(g, 0.f, "W");
  actorflow::variable b = ops::variable(g, 0.f, "b");
  output loss = ops::reduce_mean(ops::square(w * x + b - y), {}, false, "loss");
  output train = gradient_descent_optimizer{0.5}.minimize(loss);
  output init = ops::global_variables_initializer(g);
};

/// A graph over the same task that only declares W: the task finds the trained variable by
/// its name. It never runs W's initializer, which would overwrite the trained value.
struct variable_access {
  graph g;
  actorflow::variable w = ops::variable(g, 0.f, "W");
  output push = ops::assign(w, ops::constant(g, 0.5f, "half"), "push_W");
};

/// The host's trainer: the initializer, then `steps` steps of 100 random points whose labels
/// the host computes, then fetches W and b. Each request is sent from the answer to the one
/// before: the actor holds no thread between steps.
void trainer(caf::event_based_actor* self, protocol::session_actor session,
             std::shared_ptr<const linear_model> m, int steps, host_reply done) {
  auto rng = std::make_shared<std::mt19937>(2024); // a fixed seed: the same run every time
  auto step = std::make_shared<std::function<void(int)>>();
  // The function holds itself weakly (no cycle); each pending request's handler holds it.
  std::weak_ptr<std::function<void(int)>> weak_step = step;
  *step = [=](int left) {
    auto next = weak_step.lock();
    if (left == 0)
      return embedding::run_step(self, session, protocol::make_session_run({m->w.read, m->b.read}),
                                 done, [=](std::vector<tensor>& wb) {
                                   embedding::close_and_report(self, session, done,
                                                               {wb.at(0).scalar_value<float>(),
                                                                wb.at(1).scalar_value<float>()});
                                 });
    std::uniform_real_distribution<float> uniform{0.f, 1.f};
    std::vector<float> xs(100), ys(100);
    for (std::size_t i = 0; i < xs.size(); ++i) {
      xs[i] = uniform(*rng);
      ys[i] = 0.1f * xs[i] + 0.3f;
    }
    feed_list batch{{m->x, tensor::from_vector(xs)}, {m->y, tensor::from_vector(ys)}};
    embedding::run_step(self, session, protocol::make_session_run({}, batch, {m->train}), done,
                        [=](std::vector<tensor>&) { (*next)(left - 1); });
  };
  embedding::run_step(self, session, protocol::make_session_run({}, {}, {m->init}), done,
                      [=](std::vector<tensor>&) { (*step)(steps); });
}

/// The second host actor: pulls W, pushes 0.5 into it, reads it back (three steps: the order
/// of a read and an assign inside one step is not defined).
void puller_pusher(caf::event_based_actor* self, protocol::session_actor session,
                   std::shared_ptr<const variable_access> v, host_reply done) {
  auto read_back = [=](float pulled_w) {
    embedding::run_step(self, session, protocol::make_session_run({v->w.read}), done,
                        [=](std::vector<tensor>& back) {
                          embedding::close_and_report(self, session, done,
                                                      {pulled_w, back.at(0).scalar_value<float>()});
                        });
  };
  auto push = [=](float pulled_w) {
    embedding::run_step(self, session, protocol::make_session_run({}, {}, {v->push}), done,
                        [=](std::vector<tensor>&) { read_back(pulled_w); });
  };
  embedding::run_step(self, session, protocol::make_session_run({v->w.read}), done,
                      [=](std::vector<tensor>& w) { push(w.at(0).scalar_value<float>()); });
}

/// A host actor's body: it drives `session` and reports through the promise.
using host_actor =
  std::function<void(caf::event_based_actor*, protocol::session_actor, host_reply)>;

/// Opens a session actor on `target` over `g`, spawns `host` with it and waits, bounded, for
/// what the host actor reports. main is no actor: it may block, the actors never do.
host_outcome run_host(caf::actor_system& sys, const std::string& target, const graph& g,
                      host_actor host) {
  session_options options;
  options.target = target;
  options.timeout_seconds = 10;
  auto session = spawn_session(sys, g, options);
  if (!session)
    return {session.error(), {}};
  auto done = std::make_shared<std::promise<host_outcome>>();
  auto reported = done->get_future();
  auto actor = sys.spawn([=, s = *session](caf::event_based_actor* self) { host(self, s, done); });
  if (reported.wait_for(std::chrono::seconds(120)) != std::future_status::ready) {
    caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(*session, caf::exit_reason::user_shutdown);
    return {make_error(errc::deadline_exceeded, "the host actor did not finish in 120 s"), {}};
  }
  auto outcome = reported.get();
  if (!outcome.error.ok()) // on success the session actor closed and stopped itself
    caf::anon_send_exit(*session, caf::exit_reason::user_shutdown);
  return outcome;
}

int fail(const std::string& what, const status& error) {
  std::cerr << "embedding_host: " << what << ": " << error.to_string() << '\n';
  return 1;
}

int run(caf::actor_system& sys, const std::string& target) {
  auto model = std::make_shared<const linear_model>();
  auto trained = run_host(sys, target, model->g, [model](auto self, auto session, auto done) {
    trainer(self, session, model, 200, done);
  });
  if (!trained.error.ok())
    return fail("training failed", trained.error);
  float w = trained.values.at(0), b = trained.values.at(1);
  std::cout << "trained W=" << w << " b=" << b << std::endl;

  auto access = std::make_shared<const variable_access>();
  auto pushed = run_host(sys, target, access->g, [access](auto self, auto session, auto done) {
    puller_pusher(self, session, access, done);
  });
  if (!pushed.error.ok())
    return fail("pulling and pushing W failed", pushed.error);
  float pulled = pushed.values.at(0), read_back = pushed.values.at(1);
  std::cout << "pulled W=" << pulled << std::endl;
  std::cout << "pushed W=0.5 read back " << read_back << std::endl;

  bool ok = std::abs(w - 0.1f) < 1e-2f && std::abs(b - 0.3f) < 1e-2f && pulled == w &&
            read_back == 0.5f;
  if (!ok)
    std::cerr << "embedding_host: expected W~0.1, b~0.3, the pulled W equal to the trained one "
                 "and 0.5 read back\n";
  return ok ? 0 : 1;
}

} // namespace

int main() {
  // A peer or pipe reader that goes away fails a write (EPIPE) instead of killing the program.
  std::signal(SIGPIPE, SIG_IGN);
  // The server publishes its task over CAF's network layer and sessions reach it at its
  // target: the host's system needs the middleman and actorflow's message types.
  caf::actor_system_config config;
  config.load<caf::io::middleman>();
  actorflow::add_actorflow_message_types(config);
  caf::actor_system sys{config};

  server_options server_opts;
  server_opts.system = &sys; // the task's actors run in the host's system
  auto server = server::create_local_server(server_opts);
  if (!server)
    return fail("cannot start the local server", server.error());
  std::cout << "server target " << (*server)->target() << std::endl;

  int rc = run(sys, (*server)->target());
  // Before the actor system ends: its destructor waits for every actor, the server's too.
  (*server)->stop();
  return rc;
}
