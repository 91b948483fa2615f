#pragma once
/// How a host actor drives a session actor (<actorflow/actors/session_actor.hpp>) one step at a
/// time without blocking: each request is sent from the answer to the previous one, and the
/// actor reports what it fetched (or its first failure) through a promise to whoever waits.
///   auto done = std::make_shared<std::promise<host_outcome>>();
///   run_step(self, session, protocol::make_session_run({w.read}), done,
///            [=](std::vector<tensor>& fetched) { close_and_report(self, session, done, {...}); });

#include <actorflow/actors/session_actor.hpp>

#include <caf/all.hpp>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <utility>
#include <vector>

namespace embedding {

/// Bound on each answer from a session actor: a step of this example takes milliseconds.
inline constexpr auto answer_timeout = std::chrono::seconds(30);

/// What a host actor hands to main: the values it fetched, or the first failure.
struct host_outcome {
  actorflow::status error; // ok on success
  std::vector<float> values;
};
/// Set exactly once by the host actor, just before it quits.
using host_reply = std::shared_ptr<std::promise<host_outcome>>;

/// Reports `error` and stops the host actor.
inline void report_failure(caf::event_based_actor* self, const host_reply& done,
                           actorflow::status error) {
  done->set_value({std::move(error), {}});
  self->quit();
}

/// Sends one step to `session` and continues with `next(fetched)` when it succeeded. A request
/// that could not be made, a failed step or no answer within answer_timeout is reported
/// instead. The host actor needs no behavior of its own: CAF keeps it alive while one of its
/// requests waits for an answer.
inline void run_step(caf::event_based_actor* self, actorflow::protocol::session_actor session,
                     actorflow::result<actorflow::protocol::master_run_request> request,
                     host_reply done, std::function<void(std::vector<actorflow::tensor>&)> next) {
  if (!request)
    return report_failure(self, done, request.error());
  self->request(session, answer_timeout, actorflow::protocol::run_atom::value, *request)
    .then(
      [=](actorflow::protocol::master_run_result& r) {
        if (!r.outcome.ok())
          return report_failure(self, done, r.outcome);
        next(r.fetched);
      },
      [=](caf::error& err) {
        report_failure(self, done,
                       actorflow::make_error(actorflow::errc::unavailable,
                                             "no answer from the session actor: " +
                                               self->system().render(err)));
      });
}

/// Closes the session (its partitions on the tasks are freed; the tasks keep their variables)
/// and reports `values`. The session actor stops itself after answering.
inline void close_and_report(caf::event_based_actor* self,
                             actorflow::protocol::session_actor session, host_reply done,
                             std::vector<float> values) {
  self->request(session, answer_timeout, actorflow::protocol::close_atom::value)
    .then(
      [=](actorflow::status& closed) {
        done->set_value({closed, values});
        self->quit();
      },
      [=](caf::error& err) {
        report_failure(self, done,
                       actorflow::make_error(actorflow::errc::unavailable,
                                             "closing the session: " + self->system().render(err)));
      });
}

} // namespace embedding
