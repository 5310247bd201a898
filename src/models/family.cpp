#include "mimic/models/family.h"

#include "mimic/core/error.h"

namespace mimic::models {

#define MIMIC_MODEL_FAMILY(id) const Family& id##_family();
#include "mimic/models/families.def"
#undef MIMIC_MODEL_FAMILY

const std::vector<const Family*>& families() {
  static const std::vector<const Family*> all = {
#define MIMIC_MODEL_FAMILY(id) &id##_family(),
#include "mimic/models/families.def"
#undef MIMIC_MODEL_FAMILY
  };
  return all;
}

bool Family::head_of_architecture(const std::string& name, Head* head) const {
  for (const auto& [a, h] : architectures())
    if (a == name) {
      *head = h;
      return true;
    }
  return false;
}

const Family* find_family(const std::string& model_type) {
  for (const Family* f : families())
    if (f->model_type == model_type) return f;
  return nullptr;
}

const Family& family(const std::string& model_type) {
  const Family* f = find_family(model_type);
  MIMIC_CHECK(f, "unsupported model_type '", model_type, "' (mimic reads ", family_names(), ")");
  return *f;
}

std::string family_names() {
  const auto& all = families();
  std::string s;
  for (size_t i = 0; i < all.size(); ++i) s += (i == 0 ? "" : i + 1 == all.size() ? " and " : ", ") + all[i]->model_type;
  return s;
}

std::string causal_family_names() {
  std::string s;
  for (const Family* f : families())
    if (f->causal) s += (s.empty() ? "" : ", ") + f->display_name;
  return s;
}

}  // namespace mimic::models
