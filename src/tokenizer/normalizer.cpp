#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>

#include "core/check.h"
#include "tokenizer/utf8.h"

namespace nanovllm {

namespace {

utf8proc_option_t options_for(NormalizationForm form) {
  switch (form) {
    case NormalizationForm::kNFC:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    case NormalizationForm::kNFD:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
    case NormalizationForm::kNFKC:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
    case NormalizationForm::kNFKD:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  }
  return UTF8PROC_STABLE;
}

void append_utf8proc(std::string& out, std::string_view text, NormalizationForm form) {
  utf8proc_uint8_t* result = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &result, options_for(form));
  if (n < 0) {
    throw Error(fmt::format("Unicode normalization failed: {}", utf8proc_errmsg(n)));
  }
  out.append(reinterpret_cast<const char*>(result), static_cast<std::size_t>(n));
  std::free(result);
}

bool is_ascii(std::string_view text) {
  for (const char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

// True if NFC leaves the character unchanged whatever surrounds it, and no character before
// it can combine with it: NFC may then treat the text before it independently.
bool nfc_boundary_before(char32_t cp) {
  if (cp < 0x300) return true;  // no combining marks or decompositions below U+0300
  // Hangul vowel and trailing consonant jamo compose with the syllable before them.
  if ((cp >= 0x1161 && cp <= 0x1175) || (cp >= 0x11A8 && cp <= 0x11C2)) return false;
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
  if (p->combining_class != 0) return false;
  // A canonical (not compatibility) decomposition changes the character under NFC.
  if (p->decomp_seqindex != UINT16_MAX && p->decomp_type == 0) return false;
  // utf8proc marks characters that compose with a preceding starter with comb_index >= 0x8000.
  if (p->comb_index != UINT16_MAX && p->comb_index >= 0x8000) return false;
  return true;
}

// NFC that copies text through where it is already stable and hands only the segments that
// may change (a boundary character plus the non-boundary characters after it) to utf8proc.
std::string nfc_fast(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t copied = 0;         // text[0, copied) is already in out
  std::size_t segment_start = 0;  // start of the last boundary character seen
  std::size_t i = 0;
  while (i < text.size()) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {  // ASCII is always a boundary
      segment_start = i++;
      continue;
    }
    int len = 0;
    const char32_t cp = utf8::decode(text.substr(i), &len);
    if (nfc_boundary_before(cp)) {
      segment_start = i;
      i += len;
      continue;
    }
    // The segment from the last boundary through the following non-boundary characters may
    // change; normalize just that.
    i += len;
    while (i < text.size() && static_cast<unsigned char>(text[i]) >= 0x80) {
      const char32_t next = utf8::decode(text.substr(i), &len);
      if (nfc_boundary_before(next)) break;
      i += len;
    }
    out.append(text.substr(copied, segment_start - copied));
    append_utf8proc(out, text.substr(segment_start, i - segment_start), NormalizationForm::kNFC);
    copied = i;
    segment_start = i;
  }
  out.append(text.substr(copied));
  return out;
}

}  // namespace

std::string normalize_reference(std::string_view text, NormalizationForm form) {
  std::string out;
  append_utf8proc(out, text, form);
  return out;
}

std::string Normalizer::normalize(std::string_view text) const {
  std::string current(text);
  for (const NormalizationForm form : forms_) {
    if (is_ascii(current)) break;  // every form leaves ASCII unchanged
    if (form == NormalizationForm::kNFC) {
      current = nfc_fast(current);
    } else {
      current = normalize_reference(current, form);
    }
  }
  return current;
}

}  // namespace nanovllm
