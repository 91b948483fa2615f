#include "devices/bfc_allocator.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>

namespace actorflow {

namespace {

constexpr std::size_t unit = bfc_allocator::min_chunk_bytes;

std::size_t round_up(std::size_t bytes) { return (bytes + unit - 1) & ~(unit - 1); }

class host_region_source final : public region_source {
public:
  void* allocate_region(std::size_t bytes) override {
    // aligned_alloc wants a multiple of the alignment.
    return std::aligned_alloc(unit, round_up(std::max(bytes, unit)));
  }
  void free_region(void* ptr, std::size_t) override { std::free(ptr); }
};

} // namespace

std::unique_ptr<region_source> make_host_region_source() {
  return std::make_unique<host_region_source>();
}

std::size_t bfc_allocator::bin_index(std::size_t size) {
  auto units = size / unit; // >= 1: every chunk is at least one unit
  auto k = static_cast<std::size_t>(63 - __builtin_clzll(static_cast<unsigned long long>(units)));
  return std::min(k, num_bins - 1);
}

bfc_allocator::bfc_allocator(std::string name, std::unique_ptr<region_source> source,
                             bfc_options options)
  : name_(std::move(name)), source_(std::move(source)), options_(options) {
  options_.memory_limit &= ~(unit - 1);
  next_region_bytes_ = round_up(std::max(options_.initial_region_bytes, unit));
  if (!options_.allow_growth && options_.memory_limit > 0) {
    void* p = source_->allocate_region(options_.memory_limit);
    if (p != nullptr)
      add_region(p, options_.memory_limit);
    else
      failed_reservation_bytes_ = options_.memory_limit;
  }
}

bfc_allocator::~bfc_allocator() {
  for (const auto& r : regions_)
    source_->free_region(r.ptr, r.bytes);
}

bfc_allocator::chunk_handle bfc_allocator::new_chunk() {
  if (!free_handles_.empty()) {
    auto h = free_handles_.back();
    free_handles_.pop_back();
    chunks_[h] = chunk{};
    return h;
  }
  chunks_.emplace_back();
  return chunks_.size() - 1;
}

void bfc_allocator::delete_chunk(chunk_handle h) { free_handles_.push_back(h); }

void bfc_allocator::insert_free(chunk_handle h) {
  const auto& c = chunks_[h];
  bins_[bin_index(c.size)].insert(free_key{c.size, reinterpret_cast<std::uintptr_t>(c.ptr), h});
}

void bfc_allocator::remove_free(chunk_handle h) {
  const auto& c = chunks_[h];
  bins_[bin_index(c.size)].erase(free_key{c.size, reinterpret_cast<std::uintptr_t>(c.ptr), h});
}

bfc_allocator::chunk_handle bfc_allocator::find_free(std::size_t size) const {
  // Bins above the request's hold only bigger chunks, so the first hit, searching upward, is
  // the smallest chunk that fits.
  for (auto b = bin_index(size); b < num_bins; ++b) {
    auto it = bins_[b].lower_bound(free_key{size, 0, no_chunk});
    if (it != bins_[b].end())
      return it->handle;
  }
  return no_chunk;
}

void bfc_allocator::add_region(void* ptr, std::size_t bytes) {
  regions_.push_back(region{static_cast<char*>(ptr), bytes});
  bytes_reserved_ += bytes;
  auto h = new_chunk();
  chunks_[h].ptr = static_cast<char*>(ptr);
  chunks_[h].size = bytes;
  insert_free(h);
}

bool bfc_allocator::grow(std::size_t size) {
  auto left = options_.memory_limit - bytes_reserved_;
  if (size > left)
    return false;
  auto bytes = std::min(std::max(size, next_region_bytes_), left);
  void* p = source_->allocate_region(bytes);
  if (p == nullptr && bytes > size) {
    // The device may hold less than the limit says: a region just big enough may still fit.
    bytes = size;
    p = source_->allocate_region(bytes);
  }
  if (p == nullptr)
    return false;
  add_region(p, bytes);
  next_region_bytes_ = next_region_bytes_ > std::numeric_limits<std::size_t>::max() / 2
                           ? std::numeric_limits<std::size_t>::max() & ~(unit - 1)
                           : next_region_bytes_ * 2;
  return true;
}

void* bfc_allocator::allocate(std::size_t bytes) {
  std::lock_guard<std::mutex> guard{mutex_};
  auto fits = bytes <= std::numeric_limits<std::size_t>::max() - unit;
  auto size = fits ? round_up(std::max(bytes, std::size_t{1})) : 0;
  auto h = fits ? find_free(size) : no_chunk;
  if (h == no_chunk && fits && options_.allow_growth && grow(size))
    h = find_free(size);
  if (h == no_chunk) {
    ++failed_allocations_;
    std::string message = "out of memory on " + name_ + ": cannot allocate " + format_bytes(bytes);
    if (failed_reservation_bytes_ > 0)
      message += "; reserving " + format_bytes(failed_reservation_bytes_) +
                 " from the device failed at construction";
    message += "; " + describe_locked();
    throw allocation_failure{std::move(message)};
  }
  auto* ptr = chunks_[h].ptr;
  in_use_.emplace(ptr, h);
  remove_free(h);
  // Split rule: always split off the leftover. Every size is a multiple of 256, so any
  // leftover is a usable chunk, and memory kept inside an in-use chunk helps no one (TF keeps
  // some to save bookkeeping; one more set node is cheap here). So a chunk's size is always
  // exactly its rounded request.
  if (chunks_[h].size > size) {
    auto r = new_chunk(); // may reallocate chunks_: index, do not hold references across it
    chunks_[r].ptr = chunks_[h].ptr + size;
    chunks_[r].size = chunks_[h].size - size;
    chunks_[r].prev = h;
    chunks_[r].next = chunks_[h].next;
    if (chunks_[h].next != no_chunk)
      chunks_[chunks_[h].next].prev = r;
    chunks_[h].next = r;
    chunks_[h].size = size;
    insert_free(r);
  }
  auto& c = chunks_[h];
  c.in_use = true;
  c.requested = bytes;
  bytes_in_use_ += c.size;
  peak_bytes_in_use_ = std::max(peak_bytes_in_use_, bytes_in_use_);
  ++allocations_;
  return ptr;
}

void bfc_allocator::deallocate(void* ptr, std::size_t) {
  if (ptr == nullptr)
    return;
  std::lock_guard<std::mutex> guard{mutex_};
  auto it = in_use_.find(ptr);
  if (it == in_use_.end()) {
    // A double free or a pointer from elsewhere: aborting a training job over it costs more
    // than the leak or the mistake itself, so it is counted for tests and monitoring instead.
    ++bad_frees_;
    return;
  }
  auto h = it->second;
  in_use_.erase(it);
  bytes_in_use_ -= chunks_[h].size;
  chunks_[h].in_use = false;
  chunks_[h].requested = 0;
  // Neighbour links stop at region ends, so merging stays within a region.
  auto next = chunks_[h].next;
  if (next != no_chunk && !chunks_[next].in_use) {
    remove_free(next);
    chunks_[h].size += chunks_[next].size;
    chunks_[h].next = chunks_[next].next;
    if (chunks_[h].next != no_chunk)
      chunks_[chunks_[h].next].prev = h;
    delete_chunk(next);
  }
  auto prev = chunks_[h].prev;
  if (prev != no_chunk && !chunks_[prev].in_use) {
    remove_free(prev);
    chunks_[prev].size += chunks_[h].size;
    chunks_[prev].next = chunks_[h].next;
    if (chunks_[prev].next != no_chunk)
      chunks_[chunks_[prev].next].prev = prev;
    delete_chunk(h);
    h = prev;
  }
  insert_free(h);
}

std::size_t bfc_allocator::largest_free_chunk() const {
  for (auto b = num_bins; b-- > 0;)
    if (!bins_[b].empty())
      return bins_[b].rbegin()->size;
  return 0;
}

bfc_stats bfc_allocator::stats() const {
  std::lock_guard<std::mutex> guard{mutex_};
  bfc_stats s;
  s.bytes_in_use = bytes_in_use_;
  s.peak_bytes_in_use = peak_bytes_in_use_;
  s.bytes_reserved = bytes_reserved_;
  s.memory_limit = options_.memory_limit;
  s.largest_free_chunk = largest_free_chunk();
  s.allocations = allocations_;
  s.failed_allocations = failed_allocations_;
  s.bad_frees = bad_frees_;
  s.regions = regions_.size();
  return s;
}

std::string bfc_allocator::describe_locked() const {
  auto text = "in use " + format_bytes(bytes_in_use_) + " of " +
              format_bytes(options_.memory_limit) + " (peak " + format_bytes(peak_bytes_in_use_) +
              "), largest free chunk " + format_bytes(largest_free_chunk());
  // With growth the limit is not all there: say how much the device actually gave.
  if (options_.allow_growth)
    text += ", " + format_bytes(bytes_reserved_) + " reserved in " +
            std::to_string(regions_.size()) + (regions_.size() == 1 ? " region" : " regions");
  return text;
}

std::string bfc_allocator::describe() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return describe_locked();
}

} // namespace actorflow
