#include "graph/status.hpp"

#include "graph/device_name.hpp"

namespace actorflow {

const char* to_string(errc code) {
  switch (code) {
    case errc::ok: return "ok";
    case errc::invalid_argument: return "invalid_argument";
    case errc::not_found: return "not_found";
    case errc::already_exists: return "already_exists";
    case errc::failed_precondition: return "failed_precondition";
    case errc::unimplemented: return "unimplemented";
    case errc::out_of_range: return "out_of_range";
    case errc::data_loss: return "data_loss";
    case errc::aborted: return "aborted";
    case errc::unavailable: return "unavailable";
    case errc::deadline_exceeded: return "deadline_exceeded";
    case errc::resource_exhausted: return "resource_exhausted";
    case errc::internal: return "internal";
    case errc::permission_denied: return "permission_denied";
  }
  return "unknown";
}

status status::with_context(const std::string& context) const {
  if (ok())
    return *this;
  auto out = status{code_, context + ": " + message_};
  out.origin_ = origin_;
  return out;
}

status status::with_origin(task_origin from) const {
  auto out = *this;
  if (!ok() && !origin_)
    out.origin_ = std::move(from);
  return out;
}

std::string task_origin::name() const { return task_name(job, task); }

std::string status::to_string() const {
  if (ok())
    return "ok";
  return std::string{actorflow::to_string(code_)} + ": " + message_;
}

} // namespace actorflow
