// The four commands of the full library (record, distill, convert, report) in a build without it: each takes any
// arguments and refuses in one line naming the libraries the build lacked (CMakeLists.txt, MIMIC_HAVE_FULL).
// Compiled in every build so that it cannot rot; it registers nothing where the real commands exist.
#include <memory>
#include <string>

#include "cli.h"
#include "mimic/core/error.h"

#ifndef MIMIC_HAVE_FULL
#define MIMIC_HAVE_FULL 1
#endif

namespace mimic::cli {

#if !MIMIC_HAVE_FULL
namespace {
void register_missing(CLI::App& app, const std::string& name, const std::string& needs) {
  auto* sub = app.add_subcommand(name, "(not in this build: needs " + needs + ")");
  sub->allow_extras();
  sub->callback([name] {
    fail("mimic was built without ", name, ": it needs ", MIMIC_FULL_MISSING,
         " (install them, then configure and build again; README, 'Building')");
  });
}
}  // namespace

void register_record(CLI::App& app) { register_missing(app, "record", "HDF5 and zlib"); }
void register_distill(CLI::App& app) { register_missing(app, "distill", "HDF5 and zlib (it reads records)"); }
void register_convert(CLI::App& app) { register_missing(app, "convert", "HDF5 and zlib (it distills)"); }
void register_report(CLI::App& app) { register_missing(app, "report", "HDF5, zlib and cairo"); }
#endif

}  // namespace mimic::cli
