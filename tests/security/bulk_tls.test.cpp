// The bulk channel under mutual TLS: frames from a sender with a certificate of the cluster CA
// arrive; a sender of another CA, or one without TLS, is refused before a frame is read, and
// its send fails saying so (the endpoint's welcome never comes).
#include "actors/bulk_channel.hpp"
#include "actors/bulk_socket.hpp"
#include "security/attack_util.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <thread>

using namespace actorflow;
using namespace actorflow::testing;

namespace {

status send_one(const transport_security& security, const std::string& address, tensor value) {
  bulk_sender sender{security};
  std::promise<status> written;
  sender.send(address, 1, "a;b;x:0", std::move(value), [&](const status& s) { written.set_value(s); });
  auto s = written.get_future().get();
  sender.close();
  return s;
}

} // namespace

TEST_CASE("the bulk channel with mutual TLS carries frames between members of the cluster CA only", "[security][tls][bulk]") {
  actorflow::test::temp_dir dir;
  auto certs = dir.path() + "/cluster";
  auto other = dir.path() + "/other";
  make_certificates(certs, {"ps0", "worker0"});
  make_certificates(other, {"intruder"});

  std::atomic<int> delivered{0};
  std::atomic<double> sum{0};
  auto listening = bulk_endpoint::listen(
    "127.0.0.1",
    [&](std::int64_t, std::string, tensor value) {
      double total = 0;
      for (auto x : value.to_vector<float>())
        total += x;
      sum = total;
      ++delivered;
      return status{};
    },
    {}, tls_of(certs, "ps0", certs, 2000));
  REQUIRE(listening.ok());
  auto& endpoint = *listening;
  auto delivered_within = [&](int count, std::chrono::milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (delivered < count && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return delivered >= count;
  };

  // 4 MiB: many TLS records.
  std::vector<float> ones(std::size_t{1} << 20, 1.f);
  REQUIRE(send_one(tls_of(certs, "worker0", certs, 2000), endpoint->address(),
                   tensor::from_vector<float>(ones)).ok());
  REQUIRE(delivered_within(1, std::chrono::seconds(10)));
  CHECK(sum == Approx(double(ones.size())));

  auto refused = send_one(tls_of(other, "intruder", certs, 2000), endpoint->address(),
                          tensor::from_vector<float>({1.f}));
  CHECK_FALSE(refused.ok());
  auto plain = send_one(transport_security{}, endpoint->address(), tensor::from_vector<float>({1.f}));
  CHECK_FALSE(plain.ok());
  CHECK(refused.message().find("refused this process") != std::string::npos);
  CHECK_FALSE(delivered_within(2, std::chrono::milliseconds(500)));
  CHECK(delivered == 1);
}

TEST_CASE("the bulk channel's TLS says once when its records are encrypted in user space and carries odd-sized large frames whole",
          "[security][tls][bulk]") {
  actorflow::test::temp_dir dir;
  auto certs = dir.path() + "/cluster";
  make_certificates(certs, {"ps0", "worker0"});
  std::atomic<int> delivered{0};
  std::atomic<bool> intact{true};
  // 9 MiB and 12 bytes: three receive chunks, the last a partial huge page.
  const std::size_t count = (std::size_t{9} << 18) + 3;
  auto listening = bulk_endpoint::listen(
    "127.0.0.1",
    [&](std::int64_t, std::string, tensor value) {
      auto got = value.to_vector<float>();
      for (std::size_t i = 0; i < got.size(); ++i)
        if (got[i] != float(i % 1000))
          intact = false;
      if (got.size() != count)
        intact = false;
      ++delivered;
      return status{};
    },
    {}, tls_of(certs, "ps0", certs, 2000));
  REQUIRE(listening.ok());
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i)
    values[i] = float(i % 1000);
  // Two senders: two connections, two handshakes on each side.
  for (int i = 0; i < 2; ++i)
    REQUIRE(send_one(tls_of(certs, "worker0", certs, 2000), (*listening)->address(),
                     tensor::from_vector<float>(values)).ok());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (delivered < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(delivered == 2);
  CHECK(intact);
  // Where the kernel has no tls ULP, OpenSSL falls back to user space: said once, not per
  // connection. Where it has one, the records went through the kernel and nothing is said.
  if (bulk_detail::kernel_offers_tls())
    CHECK(bulk_detail::user_space_tls_notes() <= 1);
  else
    CHECK(bulk_detail::user_space_tls_notes() == 1);
}
