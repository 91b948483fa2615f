#include "devices/device_collectives.hpp"

#include <cstring>
#include <optional>

namespace actorflow {

namespace {

/// The group broadcasts numbers, not bytes: an id travels as int64 words after a flag, 1 when
/// rank 0 made one, 0 when it could not (the others then fail at once, not at their bound).
std::int64_t id_words(std::size_t id_bytes) {
  return static_cast<std::int64_t>((id_bytes + sizeof(std::int64_t) - 1) / sizeof(std::int64_t));
}

tensor id_message(const std::vector<std::uint8_t>* id, std::size_t id_bytes) {
  tensor message{dtype::int64, tensor_shape{1 + id_words(id_bytes)}};
  auto* words = message.data<std::int64_t>();
  std::memset(words, 0, message.bytes());
  if (id != nullptr) {
    words[0] = 1;
    std::memcpy(words + 1, id->data(), id->size());
  }
  return message;
}

/// The id in rank 0's message; nothing when it made none (or the message is malformed).
std::optional<std::vector<std::uint8_t>> id_in(const tensor& message, std::size_t id_bytes) {
  if (message.type() != dtype::int64 || message.num_elements() != 1 + id_words(id_bytes) ||
      message.data<std::int64_t>()[0] != 1)
    return std::nullopt;
  std::vector<std::uint8_t> id(id_bytes);
  std::memcpy(id.data(), message.data<std::int64_t>() + 1, id_bytes);
  return id;
}

/// Rank 0's place for a collective in the order of issue; -1: rank 0 issues nothing (its
/// communicator broke), so the others fail at once too.
tensor place_message(std::int64_t place) {
  return tensor::from_vector(std::vector<std::int64_t>{place});
}

} // namespace

/// One group's communicator on one device. Guarded by device_collectives::mutex_.
struct device_collectives::entry {
  /// The member that made it: its offer's end drops it.
  std::weak_ptr<task_collective> made_by;
  /// "collective group 5 (rank 1 of 2) on /job:worker/replica:0/task:1/device:GPU:0".
  std::string what;
  std::shared_ptr<device_communicator> comm;
  bool made = false;
  /// Why it can no longer be used (broken, or its offer ended).
  std::optional<status> ended;
  /// Collectives waiting for it to be made.
  std::vector<std::function<void(status)>> waiting;
  /// Rank 0: the place the next collective gets.
  std::int64_t next_place = 0;
  /// The place of the next collective to issue, and those that wait for their turn.
  std::int64_t next_to_issue = 0;
  std::map<std::int64_t, queued> queue;
  bool issuing = false;
};

device_collectives::device_collectives(task_collective_registry& registry)
  : watch_(registry.watch_withdrawals(
      [this](const std::string& device, const std::shared_ptr<task_collective>& group) {
        withdrawn(device, group);
      })) {}

device_collectives& device_collectives::process() {
  static auto* collectives = new device_collectives{task_collectives()};
  return *collectives;
}

void device_collectives::issue(const std::shared_ptr<task_collective>& member,
                               const std::string& device, std::int64_t instance,
                               std::shared_ptr<device_communicator_factory> factory,
                               issue_fn issue, failed_fn failed) {
  queued collective{std::move(issue), std::move(failed)};
  std::shared_ptr<entry> e;
  bool make = false;
  bool wait = false;
  status ready;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    auto& slot = entries_[{member->key(), device}];
    if (!slot) {
      slot = std::make_shared<entry>();
      slot->made_by = member;
      slot->what = member->describe() + " on " + device;
      make = true;
    }
    e = slot;
    if (e->ended) {
      ready = e->ended->with_context("the communicator of " + e->what + " broke earlier");
    } else if (!e->made) {
      wait = true;
      e->waiting.push_back([this, e, member, instance, collective](status made) mutable {
        take_place(e, member, instance, std::move(made), std::move(collective));
      });
    }
  }
  if (make)
    make_communicator(e, member, std::move(factory));
  if (!wait)
    take_place(e, member, instance, std::move(ready), std::move(collective));
}

void device_collectives::make_communicator(const std::shared_ptr<entry>& e,
                                           const std::shared_ptr<task_collective>& member,
                                           std::shared_ptr<device_communicator_factory> factory) {
  auto library = factory->library();
  auto setting_up = "setting up the " + library + " communicator of " + e->what;
  auto id_bytes = factory->id_bytes();
  std::optional<status> no_id;
  tensor message;
  if (member->rank() == 0) {
    auto id = factory->make_id();
    if (!id)
      no_id = id.error().with_context(setting_up);
    else if (id->size() != id_bytes)
      no_id = make_error(errc::internal, setting_up + ": " + library + " made an id of " +
                                           std::to_string(id->size()) + " bytes, not " +
                                           std::to_string(id_bytes));
    message = id_message(no_id ? nullptr : &*id, id_bytes);
  } else {
    message = id_message(nullptr, id_bytes); // contents unused
  }
  auto rank = member->rank();
  auto size = member->size();
  member->broadcast(
    bootstrap_collective_instance, std::move(message), 0,
    [this, e, factory, rank, size, id_bytes, setting_up, root_failed = no_id.has_value()](
      result<tensor> got) {
      if (root_failed)
        return; // ended below already
      if (!got) {
        end(e, got.error().with_context(setting_up), true);
        return;
      }
      auto id = id_in(*got, id_bytes);
      if (!id) {
        end(e, make_error(errc::aborted, setting_up + ": rank 0 could not make its id (its own "
                                                      "error says why)"),
            true);
        return;
      }
      factory->join(std::move(*id), rank, size,
                    [this, e, setting_up](result<std::shared_ptr<device_communicator>> made) {
                      if (!made)
                        made = made.error().with_context(setting_up);
                      joined(e, std::move(made));
                    });
    });
  // After the broadcast started, so that the others hear of it rather than wait.
  if (no_id)
    end(e, *no_id, true);
}

void device_collectives::joined(const std::shared_ptr<entry>& e,
                                result<std::shared_ptr<device_communicator>> made) {
  if (!made) {
    end(e, made.error(), true);
    return;
  }
  std::vector<std::function<void(status)>> waiting;
  std::optional<status> ended;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    ended = e->ended;
    if (!ended) {
      e->comm = *made;
      e->made = true;
      waiting = std::move(e->waiting);
    }
  }
  // Made after the entry ended (aborted meanwhile): peers may hold it too, so it is aborted.
  if (ended) {
    (*made)->abort(*ended);
    return;
  }
  for (auto& w : waiting)
    w(status{});
}

void device_collectives::take_place(const std::shared_ptr<entry>& e,
                                    const std::shared_ptr<task_collective>& member,
                                    std::int64_t instance, status ready, queued collective) {
  if (member->rank() == 0) {
    std::int64_t place = -1;
    if (ready.ok()) {
      std::lock_guard<std::mutex> guard{mutex_};
      if (e->ended)
        ready = *e->ended;
      else
        place = e->next_place++;
    }
    // Rank 0 needs nothing back: a lost peer shows in the collective itself.
    member->broadcast(instance, place_message(place), 0, [](result<tensor>) {});
    if (place < 0)
      collective.failed(std::move(ready));
    else
      enqueue(e, place, std::move(collective));
    return;
  }
  auto what = e->what;
  member->broadcast(
    instance, place_message(0), 0,
    [this, e, instance, ready = std::move(ready), collective = std::move(collective)](
      result<tensor> got) mutable {
      if (!ready.ok()) {
        collective.failed(std::move(ready));
        return;
      }
      auto learning = "learning from rank 0 when to issue instance " + std::to_string(instance) +
                      " of " + e->what;
      status why;
      if (!got)
        why = got.error().with_context(learning);
      else if (got->type() != dtype::int64 || got->num_elements() != 1)
        why = make_error(errc::internal, learning + ": rank 0 sent " + got->debug_string(0));
      else if (got->data<std::int64_t>()[0] < 0)
        why = make_error(errc::aborted, learning + ": rank 0's communicator is broken (its own "
                                                   "error says why)");
      if (!why.ok()) {
        // Rank 0 may have issued it: this member can no longer keep the order.
        end(e, why, true);
        collective.failed(std::move(why));
        return;
      }
      enqueue(e, got->data<std::int64_t>()[0], std::move(collective));
    });
}

void device_collectives::enqueue(const std::shared_ptr<entry>& e, std::int64_t place,
                                 queued collective) {
  status refused;
  bool misplaced = false;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    if (e->ended) {
      refused = *e->ended;
    } else if (place < e->next_to_issue || e->queue.count(place) > 0) {
      misplaced = true;
      refused = make_error(errc::internal, e->what + ": rank 0 placed two collectives at " +
                                             std::to_string(place) +
                                             " (the members' graphs differ)");
    } else {
      e->queue.emplace(place, std::move(collective));
      if (e->issuing)
        return;
      e->issuing = true;
    }
  }
  if (!refused.ok()) {
    if (misplaced)
      end(e, refused, true);
    collective.failed(std::move(refused));
    return;
  }
  issue_in_order(e);
}

void device_collectives::issue_in_order(const std::shared_ptr<entry>& e) {
  for (;;) {
    queued next;
    std::shared_ptr<device_communicator> comm;
    {
      std::lock_guard<std::mutex> guard{mutex_};
      auto found = e->ended ? e->queue.end() : e->queue.find(e->next_to_issue);
      if (found == e->queue.end()) {
        e->issuing = false;
        return;
      }
      next = std::move(found->second);
      e->queue.erase(found);
      ++e->next_to_issue;
      comm = e->comm;
    }
    auto issued = next.issue(comm);
    if (!issued.ok()) {
      // The others issued theirs: they wait for this member's, which never comes.
      auto why = issued.with_context("issuing on the communicator of " + e->what);
      end(e, why, true);
      next.failed(std::move(why));
    }
  }
}

void device_collectives::abort(std::int64_t group_key, const std::string& device,
                               const status& why) {
  std::shared_ptr<entry> e;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    auto found = entries_.find({group_key, device});
    if (found == entries_.end())
      return;
    e = found->second;
  }
  end(e, why, true);
}

void device_collectives::end(const std::shared_ptr<entry>& e, const status& why, bool abort) {
  std::shared_ptr<device_communicator> comm;
  std::vector<std::function<void(status)>> waiting;
  std::map<std::int64_t, queued> queue;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    if (e->ended)
      return;
    e->ended = why;
    comm = std::move(e->comm);
    waiting = std::move(e->waiting);
    queue = std::move(e->queue);
  }
  if (comm && abort)
    comm->abort(why);
  for (auto& w : waiting)
    w(why);
  for (auto& [place, collective] : queue)
    collective.failed(why);
}

void device_collectives::withdrawn(const std::string& device,
                                   const std::shared_ptr<task_collective>& group) {
  std::shared_ptr<entry> e;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    auto found = entries_.find({group->key(), device});
    if (found == entries_.end() || found->second->made_by.lock() != group)
      return;
    e = std::move(found->second);
    entries_.erase(found);
  }
  // Let go, not aborted: collectives in flight finish on it, and its last holder releases it.
  end(e, make_error(errc::aborted, "the offer of " + e->what + " ended"), false);
}

std::size_t device_collectives::kept() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return entries_.size();
}

} // namespace actorflow
