#include "train/sync_replicas_optimizer.hpp"

#include "actors/sync_rounds.hpp"
#include "graph/ops.hpp"
#include "graph/rendezvous_key.hpp"

#include <utility>

namespace actorflow::train {

sync_replicas_optimizer::sync_replicas_optimizer(const optimizer& wrapped,
                                                 actorflow::variable global_step,
                                                 sync_replicas_settings settings)
    : wrapped_(wrapped), global_step_(std::move(global_step)), settings_(settings) {}

output sync_replicas_optimizer::apply_gradients(const std::vector<gradient_and_variable>& pairs,
                                                const std::string& name) {
  auto& g = *global_step_.read.owner;
  auto* descent = dynamic_cast<const gradient_descent_optimizer*>(&wrapped_);
  if (descent == nullptr) {
    g.record_error(make_error(errc::unimplemented,
                              "sync_replicas_optimizer wraps gradient_descent_optimizer only: the "
                              "parameter shards apply each round as value -= learning_rate * mean"));
    return {};
  }
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
  learning_rate_ = descent->learning_rate();
  pairs_ = pairs;
  std::vector<output> gradients;
  for (auto& [gradient, variable] : pairs)
    gradients.push_back(gradient);
  round_feed_ = ops::placeholder(g, dtype::int64, tensor_shape{}, "global_step/round");
  {
    auto beside = g.colocate_with(global_step_.read);
    set_global_step_ = ops::assign(global_step_, round_feed_, "global_step/set_round");
  }
  return ops::group(g, gradients, name.empty() ? "sync_replicas" : name);
}

struct sync_replicas_hook::state {
  bool is_chief = false;
  std::vector<gradient_and_variable> pairs;
  std::vector<std::string> variable_names;
  output global_step, round_feed, set_global_step, loss, accuracy;
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
  for (auto& [gradient, variable] : pairs_)
    st->variable_names.push_back(variable.name());
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
  st.in_step = false;
  st.round = outcome->global_step;
  static_cast<sync_round_outcome&>(st.last) = *outcome;
  context.set_global_step(st.round);
  return {};
}

status sync_replicas_hook::before_save(session& s, std::int64_t step) {
  auto& st = *state_;
  if (!st.is_chief)
    return {};
  return s.run_targets({st.set_global_step}, {{st.round_feed, tensor::scalar(step)}});
}

} // namespace actorflow::train
