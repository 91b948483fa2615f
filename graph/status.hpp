#pragma once
/// Error values for the whole project.
///   status s = graph.status();
///   if (!s.ok()) std::cerr << s.to_string() << '\n';
///   result<tensor> r = ...; if (!r) return r.error().with_context("node 'mul'");
/// graph/ has no CAF, so this small equivalent of caf::error / caf::expected lives here.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace actorflow {

/// Every error actorflow reports carries one of these codes.
enum class errc : std::uint8_t {
  ok = 0,
  /// A caller passed something malformed: a bad device string, mismatched shapes, a bad flag.
  invalid_argument,
  /// A named thing (node, device, file, feed) does not exist.
  not_found,
  /// Something the caller asked to create exists already.
  already_exists,
  /// The system is not in the state the operation needs, e.g. an uninitialised variable.
  failed_precondition,
  /// A feature that is not there: an op with no kernel on a device, an op with no gradient.
  unimplemented,
  /// A value out of its permitted range, e.g. an index past the end.
  out_of_range,
  /// Bytes that cannot be trusted: a truncated or corrupted file or message.
  data_loss,
  /// The step was aborted because another part of it failed.
  aborted,
  /// A peer (task, device) cannot be reached.
  unavailable,
  /// A wait ran past its bound.
  deadline_exceeded,
  /// Memory or another resource ran out.
  resource_exhausted,
  /// A broken invariant inside actorflow: a bug.
  internal,
  /// The caller may not do this: no cluster token or certificate, another client's session, a
  /// stop sent from another node. (Last, so that the codes before keep their wire values.)
  permission_denied,
};
/// The highest code (checks of codes that come off the wire).
inline constexpr errc last_errc = errc::permission_denied;

/// The printable name of a code, e.g. "invalid_argument".
const char* to_string(errc code);

/// The task an error came from: the task whose device failed, hung or went away, or whose
/// shard refused an update. Code that must tell a lost ps from a bad feed tests this field
/// (origin()->job), never the message's text.
struct task_origin {
  std::string job;
  int task = 0;
  /// The task's incarnation (drawn when it started); 0 where it is not known.
  std::uint64_t incarnation = 0;

  /// "/job:ps/replica:0/task:1".
  std::string name() const;

  friend bool operator==(const task_origin& a, const task_origin& b) {
    return a.job == b.job && a.task == b.task && a.incarnation == b.incarnation;
  }
};

/// The outcome of an operation: ok, or a code with a message that names what is at fault, and
/// where it is known, the task it came from.
class [[nodiscard]] status {
public:
  status() = default;
  status(errc code, std::string message) : code_(code), message_(std::move(message)) {}

  static status ok_status() { return {}; }

  bool ok() const { return code_ == errc::ok; }
  errc code() const { return code_; }
  const std::string& message() const { return message_; }
  /// The task the error came from; nullopt when it is this process's own, or not known.
  const std::optional<task_origin>& origin() const { return origin_; }

  /// A copy whose message is prefixed with `context`, e.g. "node 'mul' on /device:CPU:0". The
  /// origin stays.
  status with_context(const std::string& context) const;
  /// A copy from task `from`, unless it already names a task: the attribution made nearest to
  /// the failure wins (a ps's refusal relayed by a worker stays the ps's). Ok stays ok.
  status with_origin(task_origin from) const;

  /// "invalid_argument: <message>", or "ok".
  std::string to_string() const;

  friend bool operator==(const status& a, const status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_ && a.origin_ == b.origin_;
  }

private:
  errc code_ = errc::ok;
  std::string message_;
  std::optional<task_origin> origin_;
};

inline status make_error(errc code, std::string message) { return status{code, std::move(message)}; }

/// Either a value or a non-ok status (cf. caf::expected<T>).
template <class T>
class [[nodiscard]] result {
public:
  result(T value) : data_(std::move(value)) {}
  result(status error) : data_(std::move(error)) {}

  bool ok() const { return data_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(data_); }
  const T& value() const& { return std::get<0>(data_); }
  T&& value() && { return std::get<0>(std::move(data_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  /// The error; ok_status() when this holds a value.
  status error() const { return ok() ? status{} : std::get<1>(data_); }

private:
  std::variant<T, status> data_;
};

} // namespace actorflow

/// Returns early from the enclosing function when `expr` yields a non-ok status.
#define AF_RETURN_IF_ERROR(expr)                                                                   \
  do {                                                                                             \
    ::actorflow::status af_status_ = (expr);                                                       \
    if (!af_status_.ok())                                                                          \
      return af_status_;                                                                           \
  } while (false)
