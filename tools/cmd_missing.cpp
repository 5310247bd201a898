// The commands of the full library in a build without it: record, distill and convert without HDF5 and zlib, report
// also without cairo. Each takes any arguments and refuses in one line naming the libraries the build lacked
// (CMakeLists.txt, MIMIC_HAVE_FULL, MIMIC_HAVE_REPORT).
// Compiled in every build so that it cannot rot; it registers nothing where the real commands exist.
#include <memory>
#include <string>

#include "cli.h"
#include "mimic/core/error.h"

#ifndef MIMIC_HAVE_FULL
#define MIMIC_HAVE_FULL 1
#endif
#ifndef MIMIC_HAVE_REPORT
#define MIMIC_HAVE_REPORT 1
#endif

namespace mimic::cli {

namespace {
[[maybe_unused]] void register_missing(CLI::App& app, const std::string& name, const std::string& needs, const std::string& missing) {
  auto* sub = app.add_subcommand(name, "(not in this build: needs " + needs + ")");
  sub->allow_extras();
  sub->callback([name, missing] {
    fail("mimic was built without ", name, ": it needs ", missing, " (install them, then configure and build again; README, 'Building')");
  });
}
}  // namespace

#if !MIMIC_HAVE_FULL
void register_record(CLI::App& app) { register_missing(app, "record", "HDF5 and zlib", MIMIC_FULL_MISSING); }
void register_distill(CLI::App& app) { register_missing(app, "distill", "HDF5 and zlib (it reads records)", MIMIC_FULL_MISSING); }
void register_convert(CLI::App& app) { register_missing(app, "convert", "HDF5 and zlib (it distills)", MIMIC_FULL_MISSING); }
#endif
#if !MIMIC_HAVE_REPORT
void register_report(CLI::App& app) { register_missing(app, "report", "HDF5, zlib and cairo", MIMIC_REPORT_MISSING); }
#endif

}  // namespace mimic::cli
