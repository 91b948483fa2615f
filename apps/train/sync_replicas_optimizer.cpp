#include "train/sync_replicas_optimizer.hpp"

#include "actors/sync_rounds.hpp"
#include "graph/ops.hpp"
#include "graph/rendezvous_key.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

namespace actorflow::train {

sync_replicas_optimizer::sync_replicas_optimizer(optimizer& wrapped,
                                                 actorflow::variable global_step,
                                                 sync_replicas_settings settings)
    : wrapped_(wrapped), global_step_(std::move(global_step)), settings_(settings) {}

output sync_replicas_optimizer::apply_gradients(const std::vector<gradient_and_variable>& pairs,
                                                const std::string& name) {
  auto& g = *global_step_.read.owner;
  if (!pairs_.empty()) {
    g.record_error(make_error(errc::failed_precondition,
                              "sync_replicas_optimizer: apply_gradients was called already"));
    return {};
  }
  if (settings_.replicas_to_aggregate < 1 ||
      settings_.replicas_to_aggregate > settings_.total_num_replicas) {
    g.record_error(make_error(
      errc::invalid_argument,
      "sync_replicas_optimizer: replicas_to_aggregate " +
        std::to_string(settings_.replicas_to_aggregate) + " must be between 1 and total_num_replicas " +
        std::to_string(settings_.total_num_replicas)));
    return {};
  }
  pairs_ = pairs;
  std::vector<output> gradients;
  for (auto& [gradient, variable] : pairs)
    gradients.push_back(gradient);
  round_feed_ = ops::placeholder(g, dtype::int64, tensor_shape{}, "global_step/round");
  {
    auto beside = g.colocate_with(global_step_.read);
    set_global_step_ = ops::assign(global_step_, round_feed_, "global_step/set_round");
  }
  if (auto* descent = dynamic_cast<const gradient_descent_optimizer*>(&wrapped_)) {
    learning_rate_ = descent->learning_rate();
    for (auto& [gradient, variable] : pairs)
      pushed_.push_back(variable.name());
    return ops::group(g, gradients, name.empty() ? "sync_replicas" : name);
  }
  // The chief applies: each round's mean lands in an accumulator beside its variable.
  learning_rate_ = -1;
  std::vector<gradient_and_variable> means;
  std::vector<actorflow::variable> accumulators;
  for (auto& [gradient, variable] : pairs) {
    auto accumulator = make_slot(variable, "sync_gradient");
    accumulators.push_back(accumulator);
    means.emplace_back(accumulator.read, variable);
    pushed_.push_back(accumulator.name());
  }
  auto applied = wrapped_.apply_gradients(means, "sync_replicas_apply");
  std::vector<output> after_apply;
  {
    auto after = g.control_dependencies({applied});
    for (auto& accumulator : accumulators) {
      auto beside = g.colocate_with(accumulator.ref);
      after_apply.push_back(ops::assign(accumulator,
                                        ops::zeros(g, accumulator.ref.shape().dims(),
                                                   accumulator.ref.type(), "zeros"),
                                        "zero_sync_gradient"));
    }
    auto beside = g.colocate_with(global_step_.read);
    after_apply.push_back(ops::assign_add(global_step_, ops::constant(g, std::int64_t{1}, "one_round"),
                                          "count_round"));
  }
  chief_apply_ = ops::group(g, after_apply, "sync_replicas_chief_apply");
  return ops::group(g, gradients, name.empty() ? "sync_replicas" : name);
}

struct sync_replicas_hook::state {
  bool is_chief = false;
  std::vector<gradient_and_variable> pairs;
  std::vector<std::string> variable_names;
  output global_step, round_feed, set_global_step, loss, accuracy;
  /// The chief's apply when the chief applies (invalid when the shards do).
  output chief_apply;
  std::chrono::milliseconds answer_bound{0};
  sync_round_client rounds;
  std::int64_t round = 0;
  /// Sessions made ready so far; whether a step began (before_run) and has not ended
  /// (after_run), and in which session it began: a step that runs again after a lost ps came
  /// back has the batch its caller chose for a round that may be gone, and pushes nothing.
  int sessions = 0;
  bool in_step = false;
  int step_began_in = 0;
  bool skip = false;
  sync_round_report last;

  state(cluster_spec cluster, std::string ps_job, sync_round_settings settings)
      : rounds(std::move(cluster), std::move(ps_job), settings) {}
};

std::unique_ptr<sync_replicas_hook>
sync_replicas_optimizer::make_session_run_hook(bool is_chief,
                                               sync_replicas_hook_options options) const {
  sync_round_settings settings;
  settings.worker_task = options.worker_task;
  settings.incarnation = new_incarnation();
  settings.learning_rate = learning_rate_;
  settings.replicas_to_aggregate = settings_.replicas_to_aggregate;
  settings.round_timeout_ms = static_cast<std::int64_t>(settings_.round_timeout_seconds * 1000);
  settings.answer_bound = options.answer_bound;
  auto st = std::make_unique<sync_replicas_hook::state>(
    options.cluster ? *options.cluster : cluster_spec{}, options.ps_job, settings);
  st->is_chief = is_chief;
  st->pairs = pairs_;
  st->variable_names = pushed_;
  st->chief_apply = chief_apply_;
  st->answer_bound = options.answer_bound;
  st->global_step = global_step_.read;
  st->round_feed = round_feed_;
  st->set_global_step = set_global_step_;
  st->loss = options.loss;
  st->accuracy = options.accuracy;
  return std::make_unique<sync_replicas_hook>(std::move(st));
}

sync_replicas_hook::sync_replicas_hook(std::unique_ptr<state> st) : state_(std::move(st)) {}

sync_replicas_hook::~sync_replicas_hook() = default;

std::int64_t sync_replicas_hook::round() const { return state_->round; }

const sync_round_report& sync_replicas_hook::last_round() const { return state_->last; }

status sync_replicas_hook::after_create_session(session& s) {
  auto& st = *state_;
  if (st.pairs.empty())
    return make_error(errc::failed_precondition,
                      "sync_replicas_hook: the optimizer built no train op (apply_gradients first)");
  AF_RETURN_IF_ERROR(st.rounds.find_shards(st.variable_names));
  auto at = s.run({st.global_step});
  if (!at)
    return at.error();
  st.round = at->at(0).scalar_value<std::int64_t>();
  ++st.sessions;
  return {};
}

result<session_run_args> sync_replicas_hook::before_run(session_run_context&) {
  auto& st = *state_;
  st.skip = st.in_step && st.step_began_in != st.sessions;
  st.in_step = true;
  st.step_began_in = st.sessions;
  session_run_args args;
  for (auto& [gradient, variable] : st.pairs)
    args.fetches.push_back(gradient);
  for (auto& scalar : {st.loss, st.accuracy})
    if (scalar.valid())
      args.fetches.push_back(scalar);
  return args;
}

status sync_replicas_hook::after_run(session_run_context& context,
                                     const std::vector<tensor>& values) {
  auto& st = *state_;
  st.last = sync_round_report{};
  if (st.skip) {
    // The step ran again after a lost ps came back: its gradients are of the restored
    // variables but of the batch the caller chose for the round before; the caller's next
    // step takes the round's own.
    st.in_step = false;
    st.last.skipped = true;
    context.set_global_step(st.round);
    return {};
  }
  std::vector<std::pair<std::string, tensor>> gradients;
  for (std::size_t i = 0; i < st.pairs.size(); ++i)
    gradients.emplace_back(st.variable_names[i], values.at(i));
  auto next = st.pairs.size();
  auto scalar_at = [&](const output& scalar) {
    return scalar.valid() ? values.at(next++).scalar_value<double>() : 0.0;
  };
  auto loss = scalar_at(st.loss);
  auto accuracy = scalar_at(st.accuracy);
  auto outcome = st.rounds.push(st.round, gradients, loss, accuracy);
  if (!outcome)
    return outcome.error();
  if (st.chief_apply.valid())
    AF_RETURN_IF_ERROR(wait_for_apply(context.raw_session(), outcome->global_step));
  st.in_step = false;
  st.round = outcome->global_step;
  static_cast<sync_round_outcome&>(st.last) = *outcome;
  context.set_global_step(st.round);
  return {};
}

status sync_replicas_hook::wait_for_apply(session& s, std::int64_t round) {
  auto& st = *state_;
  auto counted = [&]() -> result<std::int64_t> {
    auto at = s.run({st.global_step});
    if (!at)
      return at.error();
    return at->at(0).scalar_value<std::int64_t>();
  };
  auto now = counted();
  if (!now)
    return now.error();
  // The chief applies the closed round (its own gradient in it or not); the others wait until
  // it has, so that their next gradients see the updated variables.
  if (st.is_chief) {
    if (*now < round)
      AF_RETURN_IF_ERROR(s.run_targets({st.chief_apply}));
    return {};
  }
  auto deadline = std::chrono::steady_clock::now() + st.answer_bound;
  auto pause = std::chrono::microseconds(200);
  while (*now < round) {
    if (std::chrono::steady_clock::now() > deadline)
      return make_error(errc::deadline_exceeded,
                        "the chief did not apply synchronous round " + std::to_string(round - 1) +
                          " within " + std::to_string(st.answer_bound.count() / 1000) + " s");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
    now = counted();
    if (!now)
      return now.error();
  }
  return {};
}

status sync_replicas_hook::before_save(session& s, std::int64_t step) {
  auto& st = *state_;
  // Where the chief applies, the global step variable counts the rounds itself.
  if (!st.is_chief || st.chief_apply.valid())
    return {};
  return s.run_targets({st.set_global_step}, {{st.round_feed, tensor::scalar(step)}});
}

} // namespace actorflow::train
