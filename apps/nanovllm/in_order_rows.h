// Output rows that complete in any order, written in input order: each as soon as every earlier
// row is written, so a run cut short leaves its leading finished rows in the output.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <optional>
#include <vector>

#include "nanovllm/json_lines.h"

namespace nanovllm {

class InOrderRows {
 public:
  // `io` must outlive this; rows are numbered 0 to count - 1.
  InOrderRows(JsonLinesIO& io, size_t count);

  // Row `index` is final: writes it and the rows after it that were waiting for it.
  void add(size_t index, nlohmann::ordered_json row);
  size_t written() const { return next_; }

 private:
  JsonLinesIO& io_;
  std::vector<std::optional<nlohmann::ordered_json>> waiting_;
  size_t next_ = 0;  // the first row not written yet
};

}  // namespace nanovllm
