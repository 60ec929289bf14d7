#include "nanovllm/in_order_rows.h"

#include "core/check.h"

namespace nanovllm {

InOrderRows::InOrderRows(JsonLinesIO& io, size_t count) : io_(io), waiting_(count) {}

void InOrderRows::add(size_t index, nlohmann::ordered_json row) {
  NVLLM_CHECK_LT(index, waiting_.size());
  NVLLM_CHECK_MSG(index >= next_ && !waiting_[index], "row {} was added twice", index);
  waiting_[index] = std::move(row);
  for (; next_ < waiting_.size() && waiting_[next_]; ++next_) {
    io_.write(*waiting_[next_]);
    waiting_[next_].reset();
  }
}

}  // namespace nanovllm
