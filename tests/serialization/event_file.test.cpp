#include "serialization/event_file.hpp"
#include "serialization/file_io.hpp"

#include "graph/ops.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>

using namespace actorflow;
using actorflow::test::temp_dir;

namespace {
std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> found;
  for (auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
      found.push_back(entry.path().string());
  return found;
}
} // namespace

TEST_CASE("CRC-32C matches the Castagnoli check value and TFRecord's mask") {
  const std::string check = "123456789";
  CHECK(crc32c(check.data(), check.size()) == 0xe3069283u);
  // TFRecord's mask (rotate right by 15, add 0xa282ead8) of that check value, worked out by
  // hand; tests/apps/tensorboard_events.py checks whole files with Python's crc32c package.
  CHECK(masked_crc32c(check.data(), check.size()) == 0xc78ab0e5u);
  CHECK(crc32c("", 0) == 0);
}

TEST_CASE("an event file holds its version, scalars and graph as whole, checked records") {
  temp_dir dir;
  graph g;
  auto x = ops::constant(g, tensor::scalar(2.0f), "x");
  ops::mul(x, x);
  auto writer = event_file_writer::open(dir.path() + "/logs");
  REQUIRE(writer);
  REQUIRE((*writer)->add_scalars(1, {{"loss", 0.5}, {"accuracy", 0.25}}).ok());
  REQUIRE((*writer)->add_graph(g).ok());
  auto files = event_files(dir.path() + "/logs");
  REQUIRE(files.size() == 1);
  CHECK(files[0] == (*writer)->path());
  auto records = read_event_records(files[0]);
  REQUIRE(records);
  REQUIRE(records->size() == 3);
  // The version record: field 3 (file_version), "brain.Event:2".
  CHECK(records->at(0).find("brain.Event:2") != std::string::npos);
  CHECK(records->at(1).find("loss") != std::string::npos);
  CHECK(records->at(2).find("mul") != std::string::npos);
}

TEST_CASE("serialized summaries of scalars and histograms go into an event file, and bad ones are refused naming them") {
  temp_dir dir;
  auto summary = serialize_summary({{"loss", false, {0.25}}, {"weights", true, {-1.0, 0.5, 0.5, 3.0}}});
  REQUIRE(summary);
  auto writer = event_file_writer::open(dir.path());
  REQUIRE(writer);
  REQUIRE((*writer)->add_summary(12, *summary).ok());
  auto records = read_event_records((*writer)->path());
  REQUIRE(records);
  REQUIRE(records->size() == 2);
  CHECK(records->at(1).find(*summary) != std::string::npos); // the Summary, whole, in its Event
  CHECK(records->at(1).find("weights") != std::string::npos);
  auto two = serialize_summary({{"accuracy", false, {0.5, 0.75}}});
  REQUIRE_FALSE(two);
  CHECK(two.error().message().find("summary 'accuracy': a scalar summary needs one value, not 2") !=
        std::string::npos);
  auto garbage = (*writer)->add_summary(3, std::string{"\xff\xff\xff", 3});
  REQUIRE_FALSE(garbage.ok());
  CHECK(garbage.message().find("the summary of step 3 is not a Summary") != std::string::npos);
}

TEST_CASE("a resumed run starts a new event file with a SessionLog START at its step") {
  temp_dir dir;
  { REQUIRE(event_file_writer::open(dir.path())); }
  auto resumed = event_file_writer::open(dir.path(), 120);
  REQUIRE(resumed);
  auto files = event_files(dir.path());
  REQUIRE(files.size() == 2);
  // In name order, the order TensorBoard reads them in, even within one second.
  std::sort(files.begin(), files.end());
  CHECK(files[1] == (*resumed)->path());
  auto records = read_event_records((*resumed)->path());
  REQUIRE(records);
  REQUIRE(records->size() == 2);
  // step = 120 (field 2, varint 0x78) and session_log (field 7) with status START (1).
  auto& start = records->at(1);
  CHECK(start.find(std::string{"\x10\x78", 2}) != std::string::npos);
  CHECK(start.find(std::string{"\x3a\x02\x08\x01", 4}) != std::string::npos);
}

TEST_CASE("a corrupted or torn event record is an error naming the file and byte offset") {
  temp_dir dir;
  std::string path;
  {
    auto writer = event_file_writer::open(dir.path());
    REQUIRE(writer);
    REQUIRE((*writer)->add_scalars(7, {{"loss", 1.5}}).ok());
    path = (*writer)->path();
  }
  auto whole = actorflow::test::read_file_bytes(path);
  auto first = read_event_records(path);
  REQUIRE(first);
  auto second_at = 12 + first->at(0).size() + 4;

  auto flipped = whole;
  flipped[second_at + 14] ^= 0x01; // a byte of the second record's data
  actorflow::test::write_file_bytes(path, flipped);
  auto bad = read_event_records(path);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message().find(path) != std::string::npos);
  CHECK(bad.error().message().find("byte " + std::to_string(second_at)) != std::string::npos);
  CHECK(bad.error().message().find("data's CRC") != std::string::npos);

  auto torn = whole;
  torn.resize(whole.size() - 3);
  actorflow::test::write_file_bytes(path, torn);
  auto cut = read_event_records(path);
  REQUIRE_FALSE(cut);
  CHECK(cut.error().message().find("byte " + std::to_string(second_at)) != std::string::npos);
}

TEST_CASE("an event file directory that cannot be made is an error naming it") {
  temp_dir dir;
  actorflow::test::write_file_bytes(dir.path() + "/file", {1});
  auto writer = event_file_writer::open(dir.path() + "/file/logs");
  REQUIRE_FALSE(writer);
  CHECK(writer.error().message().find(dir.path() + "/file/logs") != std::string::npos);
}

TEST_CASE("a record announcing more bytes than its file holds is an error, never an allocation") {
  temp_dir dir;
  auto path = dir.path() + "/events.out.tfevents.1.host.1";
  for (std::uint64_t announced : {std::uint64_t{1} << 40, ~std::uint64_t{0}, ~std::uint64_t{0} - 2}) {
    std::vector<std::uint8_t> bytes(20);
    file_io::put_le(bytes.data(), announced, 8);
    file_io::put_le(bytes.data() + 8, masked_crc32c(bytes.data(), 8), 4);
    actorflow::test::write_file_bytes(path, bytes);
    auto read = read_event_records(path);
    INFO(announced);
    REQUIRE_FALSE(read);
    CHECK(read.error().message().find("record at byte 0: cut short") != std::string::npos);
  }
}
