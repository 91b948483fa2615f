#include "graph/rendezvous_key.hpp"

#include <random>

#include <cstdio>

namespace actorflow {

namespace {

constexpr std::size_t incarnation_digits = 16;

result<std::uint64_t> parse_hex(std::string_view digits) {
  if (digits.size() != incarnation_digits)
    return make_error(errc::invalid_argument, "an incarnation has 16 hex digits");
  std::uint64_t value = 0;
  for (char c : digits) {
    int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0)
      return make_error(errc::invalid_argument, "an incarnation has lower-case hex digits");
    value = value * 16 + static_cast<std::uint64_t>(digit);
  }
  return value;
}

} // namespace

std::string incarnation_to_string(std::uint64_t incarnation) {
  char digits[incarnation_digits + 1];
  std::snprintf(digits, sizeof digits, "%016llx", static_cast<unsigned long long>(incarnation));
  return digits;
}

namespace {

constexpr std::string_view frame_marker = ";@";

} // namespace

std::string rendezvous_key::to_string() const {
  auto text = send_device + ";" + incarnation_to_string(send_incarnation) + ";" + recv_device + ";" +
              tensor;
  return frame_iteration.empty() ? text : with_frame_iteration(text, frame_iteration);
}

std::string with_frame_iteration(const std::string& key, const std::string& frame_iteration) {
  return key + std::string{frame_marker} + frame_iteration;
}

std::string_view without_frame_iteration(std::string_view text) {
  auto at = text.rfind(frame_marker);
  return at == std::string_view::npos ? text : text.substr(0, at);
}

result<rendezvous_key> rendezvous_key::parse(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return make_error(errc::invalid_argument,
                      "bad rendezvous key '" + std::string{text} + "': " + why);
  };
  std::string_view parts[4];
  std::size_t start = 0;
  for (int i = 0; i < 3; ++i) {
    auto end = text.find(';', start);
    if (end == std::string_view::npos)
      return bad("expected send device;incarnation;recv device;tensor");
    parts[i] = text.substr(start, end - start);
    start = end + 1;
  }
  parts[3] = text.substr(start);
  if (parts[0].empty() || parts[2].empty() || parts[3].empty())
    return bad("a device or the tensor is empty");
  auto incarnation = parse_hex(parts[1]);
  if (!incarnation)
    return bad(incarnation.error().message());
  std::string frame_iteration;
  if (auto at = parts[3].rfind(frame_marker); at != std::string_view::npos) {
    frame_iteration = std::string{parts[3].substr(at + frame_marker.size())};
    parts[3] = parts[3].substr(0, at);
    if (parts[3].empty() || frame_iteration.empty())
      return bad("an empty tensor or frame");
  }
  return rendezvous_key{std::string{parts[0]}, *incarnation, std::string{parts[2]},
                        std::string{parts[3]}, std::move(frame_iteration)};
}

rendezvous_key make_rendezvous_key(std::string send_device, std::string recv_device,
                                   std::string tensor, std::uint64_t send_incarnation) {
  return rendezvous_key{std::move(send_device), send_incarnation, std::move(recv_device),
                        std::move(tensor)};
}

std::uint64_t new_incarnation() {
  std::random_device entropy;
  std::uint64_t drawn = 0;
  while (drawn == 0)
    drawn = (static_cast<std::uint64_t>(entropy()) << 32) | entropy();
  return drawn;
}

} // namespace actorflow
