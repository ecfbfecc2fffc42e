// ctnn/data/cache.hpp — cache(): keep the first complete pass, in memory or in a file.
//
// memory_cache_stage<E>: while no pass has completed, a pass reads upstream
// and keeps a copy of every element; when upstream ends, the copy becomes the
// cache and every later pass reads it instead (upstream is not opened again).
// A pass stopped early (take, break, an exception) leaves no cache.
// file_cache_stage<E>(path): the same, kept in a file. The file is written only
// when a pass completes, through io::write_file_atomically (a temporary, then
// rename), so a half-written cache never exists under `path`. Layout: magic
// "CTNNCACHE1", u32 length + element_name<E>(), u64 element count, u64 payload
// bytes, payload (write_element per element), u32 CRC-32 of everything before.
// A file at path that is truncated, corrupt or made for another element type
// throws pipeline_error naming the file and the problem; it is never
// silently rebuilt or skipped. A path that cannot be read (a directory, no
// permission) or written throws ctnn::io_error naming it.
#pragma once
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "../core/errors.hpp"
#include "../io/atomic_file.hpp"
#include "../io/read_file.hpp"
#include "element.hpp"
#include "stage.hpp"

namespace ctnn::data {

template <class E>
class memory_cache_stage final : public stage<E> {
  using store = std::vector<E>;
  struct shared_state {
    std::mutex m;
    std::shared_ptr<const store> done;
  };
  struct replay final : iterator<E> {
    std::shared_ptr<const store> d;
    std::size_t i = 0;
    bool next(E& out) override {
      if (i == d->size()) return false;
      out = (*d)[i++];
      return true;
    }
  };
  struct fill final : iterator<E> {
    iterator_ptr<E> up;
    std::shared_ptr<shared_state> st;
    store pending;
    bool next(E& out) override {
      if (up->next(out)) {
        pending.push_back(out);
        return true;
      }
      std::lock_guard lk(st->m);
      if (!st->done) st->done = std::make_shared<const store>(std::move(pending));
      return false;
    }
  };

 public:
  explicit memory_cache_stage(stage_ptr<E> up) : up_(std::move(up)), st_(std::make_shared<shared_state>()) {}
  iterator_ptr<E> open(const open_context& ctx) const override {
    {
      std::lock_guard lk(st_->m);
      if (st_->done) {
        auto it = std::make_unique<replay>();
        it->d = st_->done;
        return it;
      }
    }
    auto it = std::make_unique<fill>();
    it->up = up_->open(ctx);
    it->st = st_;
    return it;
  }
  bool complete() const {
    std::lock_guard lk(st_->m);
    return st_->done != nullptr;
  }

 private:
  stage_ptr<E> up_;
  std::shared_ptr<shared_state> st_;
};

template <class E>
class file_cache_stage final : public stage<E> {
  static constexpr char magic[] = "CTNNCACHE1";  // 10 bytes + the terminating 0 is not written

  template <class V>
  static void put(std::string& s, V v) {
    s.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  static std::string header(std::uint64_t count, std::uint64_t payload) {
    std::string h(magic, 10);
    const std::string name = element_name<E>();
    put(h, std::uint32_t(name.size()));
    h += name;
    put(h, count);
    put(h, payload);
    return h;
  }

  struct replay final : iterator<E> {
    std::string bytes;
    const char* p = nullptr;
    const char* end = nullptr;
    std::uint64_t left = 0, index = 0;
    std::string path;
    bool next(E& out) override {
      if (left == 0) return false;
      if (!read_element(p, end, out))
        throw pipeline_error("cache: " + path + ": element " + std::to_string(index) + " runs past the payload");
      --left;
      ++index;
      return true;
    }
  };
  struct fill final : iterator<E> {
    iterator_ptr<E> up;
    std::filesystem::path path;
    std::string payload;
    std::uint64_t count = 0;
    bool next(E& out) override {
      if (up->next(out)) {
        write_element(payload, out);
        ++count;
        return true;
      }
      if (!path.empty()) {
        std::string all = header(count, payload.size());
        all += payload;
        const auto crc = std::uint32_t(::crc32(0L, reinterpret_cast<const Bytef*>(all.data()), uInt(all.size())));
        put(all, crc);
        io::write_file_atomically(path, all);
        path.clear();  // written once
      }
      return false;
    }
  };

 public:
  file_cache_stage(stage_ptr<E> up, std::filesystem::path path) : up_(std::move(up)), path_(std::move(path)) {
    if (path_.empty()) throw std::invalid_argument("cache: the file name is empty");
  }
  iterator_ptr<E> open(const open_context& ctx) const override {
    std::error_code ec;
    if (std::filesystem::exists(path_, ec)) return load();
    auto it = std::make_unique<fill>();
    it->up = up_->open(ctx);
    it->path = path_;
    return it;
  }

 private:
  iterator_ptr<E> load() const {
    const std::string name = path_.string();
    auto fail = [&](const std::string& what) -> iterator_ptr<E> {
      throw pipeline_error("cache: " + name + ": " + what + " (delete it to rebuild the cache)");
    };
    auto it = std::make_unique<replay>();
    it->path = name;
    it->bytes = io::read_file(path_, "cache");  // io_error naming the path: a directory, unreadable, ...
    const std::string& b = it->bytes;
    if (b.size() < 10 + 4 || std::memcmp(b.data(), magic, 10) != 0) return fail("not a ctnn cache file (bad magic)");
    std::uint32_t name_len = 0;
    std::memcpy(&name_len, b.data() + 10, 4);
    const std::size_t head = 10 + 4 + std::size_t(name_len) + 16;
    if (b.size() < head + 4) return fail("truncated header");
    const std::string stored(b.data() + 14, name_len);
    if (stored != element_name<E>())
      return fail("written for elements " + stored + " but this pipeline yields " + element_name<E>());
    std::uint64_t count = 0, payload = 0;
    std::memcpy(&count, b.data() + 14 + name_len, 8);
    std::memcpy(&payload, b.data() + 22 + name_len, 8);
    if (b.size() != head + payload + 4)
      return fail("truncated or corrupt: the header announces " + std::to_string(payload) + " payload bytes, the file holds " +
                  std::to_string(b.size() < head + 4 ? 0 : b.size() - head - 4));
    std::uint32_t stored_crc = 0;
    std::memcpy(&stored_crc, b.data() + b.size() - 4, 4);
    const auto crc = std::uint32_t(::crc32(0L, reinterpret_cast<const Bytef*>(b.data()), uInt(b.size() - 4)));
    if (crc != stored_crc) return fail("corrupt: CRC-32 mismatch");
    it->p = b.data() + head;
    it->end = b.data() + head + payload;
    it->left = count;
    return it;
  }

  stage_ptr<E> up_;
  std::filesystem::path path_;
};

}  // namespace ctnn::data
