#include "devices/update_fence.hpp"

#include <catch2/catch.hpp>

using namespace actorflow;

namespace {

update_claim claim(std::uint64_t owner, std::int64_t closure, std::int32_t run,
                   std::int64_t settled_below, std::string node = "inc") {
  return update_claim{update_fence{owner, closure, run, settled_below}, std::move(node)};
}

} // namespace

TEST_CASE("a fence book admits each (closure, run, node) of an owner once") {
  update_fence_book book;
  CHECK(book.admit(claim(7, 1, 0, 1)));
  CHECK_FALSE(book.admit(claim(7, 1, 0, 1)));
  // Another step of the closure, another node, another closure, another owner: all new.
  CHECK(book.admit(claim(7, 1, 1, 1)));
  CHECK(book.admit(claim(7, 1, 0, 1, "apply")));
  CHECK(book.admit(claim(7, 2, 0, 1)));
  CHECK(book.admit(claim(9, 1, 0, 1)));
  CHECK(book.refused() == 1);
  CHECK(book.remembered() == 5);
}

TEST_CASE("unfenced updates always apply and are not remembered") {
  update_fence_book book;
  CHECK(book.admit(update_claim{}));
  CHECK(book.admit(update_claim{}));
  CHECK(book.remembered() == 0);
}

TEST_CASE("a fence book forgets settled closures and refuses their late repeats") {
  update_fence_book book;
  for (std::int64_t closure = 1; closure <= 100; ++closure)
    REQUIRE(book.admit(claim(7, closure, 0, 1)));
  CHECK(book.remembered() == 100);
  // Closures below 90 have finished: only 90..100 (and the new one) stay remembered.
  CHECK(book.admit(claim(7, 101, 0, 90)));
  CHECK(book.remembered() == 12);
  // A lost attempt of a settled closure arrives late: refused though forgotten.
  CHECK_FALSE(book.admit(claim(7, 5, 0, 1)));
  CHECK_FALSE(book.admit(claim(7, 89, 3, 1)));
  // A repeat of an open one is refused too; an older watermark does not bring anything back.
  CHECK_FALSE(book.admit(claim(7, 95, 0, 50)));
  CHECK(book.refused() == 3);
  // Another owner's watermark is its own.
  CHECK(book.admit(claim(8, 5, 0, 1)));
}
