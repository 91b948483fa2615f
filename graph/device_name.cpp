#include "graph/device_name.hpp"

#include <cctype>
#include <climits>
#include <utility>

namespace actorflow {

namespace {

bool is_letter(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }

bool is_digit(char c) { return c >= '0' && c <= '9'; }

/// Case-insensitive comparison with a lower-case `expected`.
bool equals_lower(std::string_view text, std::string_view expected) {
  if (text.size() != expected.size())
    return false;
  for (std::size_t i = 0; i < text.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(text[i])) != expected[i])
      return false;
  return true;
}

/// Two optional device types naming the same type (canonical_type of both is equal).
bool same_type(const std::optional<std::string>& a, const std::optional<std::string>& b) {
  if (!a || !b)
    return !a && !b;
  return device_name::canonical_type(*a) == device_name::canonical_type(*b);
}

/// Builds and runs the parse of one device string; keeps the whole text so that every error
/// can quote it.
class parser {
public:
  explicit parser(std::string_view text) : text_(text) {}

  result<device_name> run() {
    if (text_.empty())
      return device_name{};
    if (text_.front() != '/')
      return fail("a device name must start with '/'");
    // Split on '/' by hand: components may not be empty, so "//" and a trailing '/' are
    // errors rather than something to skip over silently.
    std::size_t start = 1;
    while (true) {
      auto end = text_.find('/', start);
      auto component = text_.substr(start, end == std::string_view::npos ? end : end - start);
      AF_RETURN_IF_ERROR(parse_component(component));
      if (end == std::string_view::npos)
        break;
      start = end + 1;
    }
    return std::move(name_);
  }

private:
  status fail(const std::string& detail) const {
    return make_error(errc::invalid_argument,
                      "invalid device name '" + std::string{text_} + "': " + detail);
  }

  status parse_component(std::string_view component) {
    if (component.empty())
      return fail("empty component (two '/' in a row or a trailing '/')");
    auto colon = component.find(':');
    if (colon == std::string_view::npos)
      return fail("component '" + std::string{component} + "' has no ':' and no value");
    auto key = component.substr(0, colon);
    auto value = component.substr(colon + 1);
    if (key == "job")
      return parse_job(value);
    if (key == "replica")
      return parse_index("replica", value, seen_replica_, name_.replica);
    if (key == "task")
      return parse_index("task", value, seen_task_, name_.task);
    if (key == "device")
      return parse_device(component, value);
    // Only the legacy keys are case-insensitive: TensorFlow accepts "/cpu:0" and "/CPU:0".
    if (equals_lower(key, "cpu") || equals_lower(key, "gpu"))
      return parse_legacy_device(component, key, value);
    if (key.empty())
      return fail("component '" + std::string{component} + "' has no key before ':'");
    return fail("unknown component '" + std::string{key} + "' in '" + std::string{component} +
                "' (expected job, replica, task, device, cpu or gpu)");
  }

  status parse_job(std::string_view value) {
    if (seen_job_)
      return fail("component 'job' appears more than once");
    seen_job_ = true;
    // "*" is TensorFlow's spelling of "any job": the field stays unset.
    if (value == "*")
      return {};
    if (value.empty())
      return fail("job name is empty");
    if (!is_letter(value.front()))
      return fail("job name '" + std::string{value} + "' must start with a letter");
    for (char c : value)
      if (!is_letter(c) && !is_digit(c) && c != '_' && c != '-')
        return fail("job name '" + std::string{value} +
                    "' may contain only letters, digits, '_' and '-'");
    name_.job = std::string{value};
    return {};
  }

  /// Parses a non-negative decimal index; `what` names it in errors ("task", "device").
  status parse_number(std::string_view what, std::string_view value, std::optional<int>& out) {
    if (value.empty())
      return fail(std::string{what} + " index is missing");
    if (value == "*") {
      out.reset();
      return {};
    }
    auto digits = value;
    if (digits.front() == '-' && digits.size() > 1) {
      bool all_digits = true;
      for (char c : digits.substr(1))
        all_digits = all_digits && is_digit(c);
      if (all_digits)
        return fail(std::string{what} + " index '" + std::string{value} + "' is negative");
    }
    long long number = 0;
    for (char c : digits) {
      if (!is_digit(c))
        return fail(std::string{what} + " index '" + std::string{value} + "' is not a number");
      number = number * 10 + (c - '0');
      if (number > INT_MAX)
        return fail(std::string{what} + " index '" + std::string{value} + "' is too large");
    }
    out = static_cast<int>(number);
    return {};
  }

  status parse_index(std::string_view key, std::string_view value, bool& seen,
                     std::optional<int>& out) {
    if (seen)
      return fail("component '" + std::string{key} + "' appears more than once");
    seen = true;
    return parse_number(key, value, out);
  }

  /// "/device:TYPE", "/device:TYPE:N" or "/device:TYPE:*".
  status parse_device(std::string_view component, std::string_view value) {
    AF_RETURN_IF_ERROR(claim_device(component));
    auto colon = value.find(':');
    auto type = value.substr(0, colon);
    if (type.empty())
      return fail("device type is missing in '" + std::string{component} + "'");
    if (!is_letter(type.front()))
      return fail("device type '" + std::string{type} + "' must start with a letter");
    for (char c : type)
      if (!is_letter(c) && !is_digit(c) && c != '_')
        return fail("device type '" + std::string{type} +
                    "' may contain only letters, digits and '_'");
    name_.type = device_name::canonical_type(type);
    if (colon == std::string_view::npos)
      return {};
    return parse_number("device", value.substr(colon + 1), name_.id);
  }

  /// The legacy "/cpu:0", "/GPU:1", "/cpu:*" forms; `key` is "cpu" or "gpu" in any case.
  status parse_legacy_device(std::string_view component, std::string_view key,
                             std::string_view value) {
    AF_RETURN_IF_ERROR(claim_device(component));
    name_.type = device_name::canonical_type(key);
    return parse_number("device", value, name_.id);
  }

  /// Both "/device:..." and "/cpu:..." set the device, so either counts as the one allowed.
  status claim_device(std::string_view component) {
    if (seen_device_)
      return fail("a second device component '" + std::string{component} + "'");
    seen_device_ = true;
    return {};
  }

  std::string_view text_;
  device_name name_;
  bool seen_job_ = false;
  bool seen_replica_ = false;
  bool seen_task_ = false;
  bool seen_device_ = false;
};

} // namespace

result<device_name> device_name::parse(std::string_view text) { return parser{text}.run(); }

std::string device_name::canonical_type(std::string_view type) {
  // TensorFlow's DeviceNameUtils reads "cpu" and "gpu" in any case as CPU and GPU (the legacy
  // lower-case spellings); every other type keeps the case it was written in.
  if (equals_lower(type, "cpu"))
    return "CPU";
  if (equals_lower(type, "gpu"))
    return "GPU";
  return std::string{type};
}

device_name device_name::merge(const device_name& outer, const device_name& inner) {
  device_name merged = outer;
  if (inner.job)
    merged.job = inner.job;
  if (inner.replica)
    merged.replica = inner.replica;
  if (inner.task)
    merged.task = inner.task;
  // Field by field, as TensorFlow's DeviceSpec merge does: an inner "/device:GPU:*" inside
  // "/cpu:1" keeps index 1, because the header promises that unset fields come from outer.
  if (inner.type)
    merged.type = inner.type;
  if (inner.id)
    merged.id = inner.id;
  return merged;
}

bool operator==(const device_name& a, const device_name& b) {
  return a.job == b.job && a.replica == b.replica && a.task == b.task &&
         same_type(a.type, b.type) && a.id == b.id;
}

bool device_name::fully_specified() const { return job && replica && task && type && id; }

bool device_name::empty() const { return !job && !replica && !task && !type && !id; }

bool device_name::matches(const device_name& other) const {
  return (!job || job == other.job) && (!replica || replica == other.replica) &&
         (!task || task == other.task) && (!type || same_type(type, other.type)) &&
         (!id || id == other.id);
}

std::string device_name::to_string() const {
  std::string out;
  if (job)
    out += "/job:" + *job;
  if (replica)
    out += "/replica:" + std::to_string(*replica);
  if (task)
    out += "/task:" + std::to_string(*task);
  out += local_name();
  return out;
}

std::string device_name::local_name() const {
  if (!type)
    return "";
  return "/device:" + canonical_type(*type) + ":" + (id ? std::to_string(*id) : std::string{"*"});
}

std::string task_name(const std::string& job, int task) {
  return "/job:" + job + "/replica:0/task:" + std::to_string(task);
}

std::optional<task_origin> task_origin_of(const std::string& device, std::uint64_t incarnation) {
  auto name = device_name::parse(device);
  if (!name || !name->job || !name->task)
    return std::nullopt;
  return task_origin{*name->job, *name->task, incarnation};
}

} // namespace actorflow
