#include "serialization/checkpoint.hpp"

#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>
#include <zlib.h>

#include <cstring>
#include <random>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace actorflow;
using actorflow::test::contains;
using actorflow::test::directory_entries;
using actorflow::test::read_file_bytes;
using actorflow::test::temp_dir;
using actorflow::test::write_file_bytes;

namespace {

/// Entries of every dtype, including a scalar and a tensor without elements.
checkpoint_entries sample_entries() {
  checkpoint_entries entries;
  entries["layer1/weights"] =
    tensor::from_vector<float>({1.5f, -2.f, 3.25f, 0.f, 1e-30f, -0.f}, {2, 3});
  entries["layer1/bias"] = tensor::from_vector<double>({0.1, -1e300});
  entries["global_step"] = tensor::scalar<std::int64_t>(std::int64_t{1} << 40);
  entries["counts"] = tensor::from_vector<std::int32_t>({-7, 0, 2147483647, -2147483647 - 1});
  entries["mask"] = tensor::from_vector<bool>({true, false, true, true}, {2, 2});
  entries["empty"] = tensor{dtype::float32, tensor_shape{0, 5}};
  return entries;
}

void require_same_entries(const checkpoint_entries& a, const checkpoint_entries& b) {
  REQUIRE(a.size() == b.size());
  for (auto& [name, value] : a) {
    CAPTURE(name);
    auto other = b.find(name);
    REQUIRE(other != b.end());
    CHECK(other->second.type() == value.type());
    CHECK(other->second.shape() == value.shape());
    REQUIRE(other->second.bytes() == value.bytes());
    CHECK(std::memcmp(other->second.raw_data(), value.raw_data(), value.bytes()) == 0);
  }
}

/// Writes a checkpoint of `step` with one entry "v" = [value, value+1, value+2].
std::string write_small(const std::string& path, std::int64_t step, float value) {
  checkpoint_entries entries;
  entries["v"] = tensor::from_vector<float>({value, value + 1, value + 2});
  REQUIRE(write_checkpoint(path, step, entries).ok());
  return path;
}

float first_value(const std::string& path) {
  auto data = read_checkpoint(path);
  REQUIRE(data.ok());
  return data->entries.at("v").data<float>()[0];
}

} // namespace

TEST_CASE("a checkpoint of every dtype reads back with its step and format version") {
  temp_dir dir;
  auto path = dir.path() + "/model.afckpt";
  auto entries = sample_entries();
  REQUIRE(write_checkpoint(path, 1234567890123, entries).ok());
  auto data = read_checkpoint(path);
  REQUIRE(data.ok());
  CHECK(data->step == 1234567890123);
  CHECK(data->format_version == checkpoint_format_version);
  require_same_entries(entries, data->entries);
  CHECK(verify_checkpoint(path).ok());
  // The file starts with the magic and nothing but the file is left behind.
  auto bytes = read_file_bytes(path);
  REQUIRE(bytes.size() > 32);
  CHECK(std::memcmp(bytes.data(), "\x89" "AFCKPT\n", 8) == 0);
  CHECK(directory_entries(dir.path()) == std::vector<std::string>{"model.afckpt"});
}

TEST_CASE("an empty checkpoint and one with a negative step read back") {
  temp_dir dir;
  auto path = dir.path() + "/empty.afckpt";
  REQUIRE(write_checkpoint(path, -3, {}).ok());
  auto data = read_checkpoint(path);
  REQUIRE(data.ok());
  CHECK(data->step == -3);
  CHECK(data->entries.empty());
}

TEST_CASE("writing a checkpoint refuses entries without a name or a value") {
  temp_dir dir;
  auto path = dir.path() + "/x.afckpt";
  checkpoint_entries unnamed{{"", tensor::scalar(1.f)}};
  auto s = write_checkpoint(path, 1, unnamed);
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == errc::invalid_argument);
  CHECK(contains(s.message(), "'" + path + "'"));
  checkpoint_entries no_value{{"w", tensor{}}};
  s = write_checkpoint(path, 1, no_value);
  REQUIRE_FALSE(s.ok());
  CHECK(contains(s.message(), "entry 'w' has no value"));
  CHECK(directory_entries(dir.path()).empty());
}

TEST_CASE("writing a checkpoint refuses a value in device memory and writes nothing") {
  temp_dir dir;
  auto path = dir.path() + "/x.afckpt";
  float backing[2] = {1, 2};
  memory_space gpu{"/device:GPU:0"};
  tensor on_device{dtype::float32, tensor_shape{2},
                   std::make_shared<buffer>(backing, sizeof backing, [](void*) {}, &gpu)};
  checkpoint_entries entries{{"w", on_device}};
  auto s = write_checkpoint(path, 1, entries);
  REQUIRE_FALSE(s.ok());
  CHECK(contains(s.message(), "entry 'w'"));
  CHECK(contains(s.message(), "in the memory of /device:GPU:0"));
  CHECK(directory_entries(dir.path()).empty());
}

TEST_CASE("a truncated checkpoint is refused at every length with the file name") {
  temp_dir dir;
  auto path = dir.path() + "/full.afckpt";
  REQUIRE(write_checkpoint(path, 7, sample_entries()).ok());
  auto bytes = read_file_bytes(path);
  auto cut = dir.path() + "/cut.afckpt";
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    CAPTURE(length);
    write_file_bytes(cut, std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(length)));
    auto r = read_checkpoint(cut);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::data_loss);
    CHECK(contains(r.error().message(), "'" + cut + "'"));
    CHECK(contains(r.error().message(), "truncated"));
    CHECK_FALSE(verify_checkpoint(cut).ok());
  }
  auto longer = bytes;
  longer.push_back(0);
  write_file_bytes(cut, longer);
  auto r = read_checkpoint(cut);
  REQUIRE_FALSE(r.ok());
  CHECK(contains(r.error().message(), "1 unexpected bytes"));
}

TEST_CASE("random bit flips anywhere in a checkpoint are refused with the file name") {
  temp_dir dir;
  auto path = dir.path() + "/good.afckpt";
  REQUIRE(write_checkpoint(path, 7, sample_entries()).ok());
  auto bytes = read_file_bytes(path);
  auto flipped_path = dir.path() + "/flipped.afckpt";
  std::mt19937_64 rng{20240501};
  INFO("random seed 20240501");
  // Every bit of the header, then random bits of the payload (tensor bytes included).
  std::vector<std::size_t> bits;
  for (std::size_t bit = 0; bit < 32 * 8; ++bit)
    bits.push_back(bit);
  for (int i = 0; i < 300; ++i)
    bits.push_back(std::uniform_int_distribution<std::size_t>{32 * 8, bytes.size() * 8 - 1}(rng));
  for (auto bit : bits) {
    CAPTURE(bit);
    auto flipped = bytes;
    flipped[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
    write_file_bytes(flipped_path, flipped);
    auto r = read_checkpoint(flipped_path);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::data_loss);
    CHECK(contains(r.error().message(), "'" + flipped_path + "'"));
    CHECK_FALSE(verify_checkpoint(flipped_path).ok());
  }
}

TEST_CASE("a checkpoint payload that flips a tensor byte is reported as a checksum mismatch") {
  temp_dir dir;
  auto path = dir.path() + "/w.afckpt";
  checkpoint_entries entries{{"w", tensor::from_vector<float>(std::vector<float>(1000, 0.5f))}};
  REQUIRE(write_checkpoint(path, 1, entries).ok());
  auto bytes = read_file_bytes(path);
  bytes[bytes.size() - 100] ^= 0x01; // inside the float data
  write_file_bytes(path, bytes);
  auto r = read_checkpoint(path);
  REQUIRE_FALSE(r.ok());
  CHECK(contains(r.error().message(), "checkpoint '" + path + "': payload checksum mismatch"));
}

TEST_CASE("a checkpoint of a newer format version is refused as unimplemented") {
  temp_dir dir;
  auto path = write_small(dir.path() + "/new.afckpt", 1, 1.f);
  auto bytes = read_file_bytes(path);
  bytes[8] = 2; // version 2, with a header checksum that matches
  auto crc = static_cast<std::uint32_t>(crc32(0, bytes.data(), 28));
  for (int i = 0; i < 4; ++i)
    bytes[28 + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(crc >> (8 * i));
  write_file_bytes(path, bytes);
  auto r = read_checkpoint(path);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == errc::unimplemented);
  CHECK(contains(r.error().message(), "format version 2"));
  CHECK(contains(r.error().message(), "'" + path + "'"));
}

TEST_CASE("reading a missing or non-checkpoint file names it") {
  temp_dir dir;
  auto missing = read_checkpoint(dir.path() + "/none.afckpt");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code() == errc::not_found);
  CHECK(contains(missing.error().message(), "'" + dir.path() + "/none.afckpt'"));
  auto text = dir.path() + "/text.afckpt";
  write_file_bytes(text, std::vector<std::uint8_t>(64, 'x'));
  auto r = read_checkpoint(text);
  REQUIRE_FALSE(r.ok());
  CHECK(contains(r.error().message(), "not an actorflow checkpoint"));
  auto directory = read_checkpoint(dir.path());
  REQUIRE_FALSE(directory.ok());
  CHECK(contains(directory.error().message(), "not a regular file"));
}

TEST_CASE("a checkpoint manager keeps only the newest N and leaves no temporary files") {
  temp_dir dir;
  auto run = dir.path() + "/run/nested";
  checkpoint_manager manager{run, 2};
  CHECK_FALSE(manager.latest().has_value());
  for (std::int64_t step = 1; step <= 5; ++step) {
    checkpoint_entries entries{{"v", tensor::from_vector<float>({static_cast<float>(step)})}};
    auto path = manager.save(step * 100, entries);
    REQUIRE(path.ok());
    CHECK(*path == run + "/ckpt-" + std::to_string(step * 100) + ".afckpt");
  }
  CHECK(directory_entries(run) ==
        std::vector<std::string>{"checkpoint_index", "ckpt-400.afckpt", "ckpt-500.afckpt"});
  CHECK(manager.checkpoints() ==
        std::vector<std::string>{run + "/ckpt-400.afckpt", run + "/ckpt-500.afckpt"});
  REQUIRE(manager.latest().has_value());
  CHECK(*manager.latest() == run + "/ckpt-500.afckpt");
  auto data = read_checkpoint(*manager.latest());
  REQUIRE(data.ok());
  CHECK(data->step == 500);
  CHECK(data->entries.at("v").scalar_value<float>() == 5.f);

  // A second manager on the same directory continues the same list.
  checkpoint_manager again{run + "/", 2};
  REQUIRE(again.save(600, {{"v", tensor::scalar(6.f)}}).ok());
  CHECK(directory_entries(run) ==
        std::vector<std::string>{"checkpoint_index", "ckpt-500.afckpt", "ckpt-600.afckpt"});
}

TEST_CASE("keep_last_n of 0 keeps every checkpoint and saving a step again replaces it") {
  temp_dir dir;
  checkpoint_manager manager{dir.path(), 0};
  for (std::int64_t step : {1, 2, 3, 2})
    REQUIRE(manager.save(step, {{"v", tensor::scalar(static_cast<float>(step * 10))}}).ok());
  CHECK(manager.checkpoints() == std::vector<std::string>{dir.path() + "/ckpt-1.afckpt",
                                                          dir.path() + "/ckpt-3.afckpt",
                                                          dir.path() + "/ckpt-2.afckpt"});
  CHECK(*manager.latest() == dir.path() + "/ckpt-2.afckpt");
  auto negative = manager.save(-1, {});
  REQUIRE_FALSE(negative.ok());
  CHECK(negative.error().code() == errc::invalid_argument);
}

TEST_CASE("latest falls back past a corrupted or missing newest checkpoint") {
  temp_dir dir;
  checkpoint_manager manager{dir.path(), 3};
  for (std::int64_t step = 1; step <= 3; ++step)
    REQUIRE(manager.save(step, {{"v", tensor::from_vector<float>({step * 1.f, 0.f, 0.f})}}).ok());
  auto newest = dir.path() + "/ckpt-3.afckpt";
  auto previous = dir.path() + "/ckpt-2.afckpt";

  SECTION("a flipped bit") {
    auto bytes = read_file_bytes(newest);
    bytes[bytes.size() - 5] ^= 0x10;
    write_file_bytes(newest, bytes);
  }
  SECTION("a truncation") {
    auto bytes = read_file_bytes(newest);
    bytes.resize(bytes.size() / 2);
    write_file_bytes(newest, bytes);
  }
  SECTION("a deleted file") { REQUIRE(::unlink(newest.c_str()) == 0); }

  auto latest = manager.latest();
  REQUIRE(latest.has_value());
  CHECK(*latest == previous);
  // What was passed over, and why, naming the file.
  auto search = manager.find_latest();
  REQUIRE(search.skipped.size() == 1);
  CHECK(search.skipped[0].message().find("ckpt-3.afckpt") != std::string::npos);
  CHECK(first_value(*latest) == 2.f);
  // The next save is the newest again and counts towards the three kept.
  REQUIRE(manager.save(4, {{"v", tensor::from_vector<float>({4.f, 0.f, 0.f})}}).ok());
  CHECK(*manager.latest() == dir.path() + "/ckpt-4.afckpt");
  CHECK(manager.checkpoints().size() == 3);
}

TEST_CASE("when every checkpoint is damaged the search says why for each, newest first") {
  temp_dir dir;
  checkpoint_manager manager{dir.path(), 3};
  for (std::int64_t step = 1; step <= 2; ++step) {
    REQUIRE(manager.save(step, {{"v", tensor::from_vector<float>({1.f})}}).ok());
    auto path = manager.path_for_step(step);
    auto bytes = read_file_bytes(path);
    bytes.resize(bytes.size() / 2);
    write_file_bytes(path, bytes);
  }
  auto search = manager.find_latest();
  CHECK_FALSE(search.path.has_value());
  REQUIRE(search.skipped.size() == 2);
  CHECK(search.skipped[0].message().find("ckpt-2.afckpt") != std::string::npos);
  CHECK(search.skipped[1].message().find("ckpt-1.afckpt") != std::string::npos);
  CHECK(search.skipped[0].code() == errc::data_loss);
}

TEST_CASE("without a readable index the manager finds checkpoints by step") {
  temp_dir dir;
  checkpoint_manager manager{dir.path(), 5};
  for (std::int64_t step : {5, 20, 10})
    REQUIRE(manager.save(step, {{"v", tensor::scalar(static_cast<float>(step))}}).ok());
  auto index = dir.path() + "/" + checkpoint_manager::index_file_name;
  SECTION("the index is missing") { REQUIRE(::unlink(index.c_str()) == 0); }
  SECTION("the index is garbage") { write_file_bytes(index, {'n', 'o', 'p', 'e'}); }
  CHECK(*manager.latest() == dir.path() + "/ckpt-20.afckpt");
  CHECK(manager.checkpoints().size() == 3);
}

TEST_CASE("an unusable checkpoint directory gives a clear error") {
  temp_dir dir;
  auto file = dir.path() + "/plain-file";
  write_file_bytes(file, {'x'});

  checkpoint_manager under_file{file + "/checkpoints", 3};
  auto r = under_file.save(1, {{"v", tensor::scalar(1.f)}});
  REQUIRE_FALSE(r.ok());
  CHECK(contains(r.error().message(), "cannot use checkpoint directory '" + file + "/checkpoints'"));
  CHECK_FALSE(under_file.latest().has_value());

  auto direct = write_checkpoint(dir.path() + "/missing/x.afckpt", 1, {});
  REQUIRE_FALSE(direct.ok());
  CHECK(direct.code() == errc::not_found);
  CHECK(contains(direct.message(), "cannot write checkpoint '" + dir.path() + "/missing/x.afckpt'"));

  // Permission bits do not bind root, so this part needs an ordinary user.
  if (::geteuid() != 0) {
    auto locked = dir.path() + "/locked";
    REQUIRE(::mkdir(locked.c_str(), 0500) == 0);
    checkpoint_manager manager{locked, 3};
    auto denied = manager.save(1, {{"v", tensor::scalar(1.f)}});
    REQUIRE_FALSE(denied.ok());
    CHECK(denied.error().code() == errc::failed_precondition);
    CHECK(contains(denied.error().message(), "'" + locked + "/ckpt-1.afckpt'"));
    CHECK(contains(denied.error().message(), "Permission denied"));
    ::chmod(locked.c_str(), 0700);
    CHECK(directory_entries(locked).empty());
  }
}
