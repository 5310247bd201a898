#include "mimic/core/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace mimic {

namespace {
bool progress_wanted() {
  if (const char* f = std::getenv("MIMIC_PROGRESS"); f && *f) return f[0] == '1';
  return isatty(STDERR_FILENO) == 1;
}
}  // namespace

std::string format_duration(double s) {
  char buf[64];
  if (s < 60) {
    std::snprintf(buf, sizeof(buf), "%.1fs", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof(buf), "%dm %02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%dh %02dm", static_cast<int>(s) / 3600, (static_cast<int>(s) / 60) % 60);
  }
  return buf;
}

Progress::Progress(std::string label, int64_t total, std::string unit)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), enabled_(progress_wanted()) {
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

Progress::~Progress() { finish(); }

double Progress::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::update(int64_t done, const std::string& extra) {
  done_ = done;
  extra_ = extra;
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100) && (total_ <= 0 || done_ < total_)) return;
  last_draw_ = now;
  draw(false);
}

void Progress::advance(int64_t n, const std::string& extra) { update(done_ + n, extra); }

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (enabled_) draw(true);
}

void Progress::draw(bool final) {
  double t = elapsed_seconds();
  double rate = t > 0 ? static_cast<double>(done_) / t : 0.0;
  std::string line = label_ + " ";
  char buf[160];
  if (total_ > 0) {
    const int width = 24;
    double frac = std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_));
    int fill = static_cast<int>(frac * width);
    line += "[" + std::string(fill, '#') + std::string(width - fill, '.') + "] ";
    std::snprintf(buf, sizeof(buf), "%lld/%lld %s  %.1f %s/s", static_cast<long long>(done_),
                  static_cast<long long>(total_), unit_.c_str(), rate, unit_.c_str());
    line += buf;
    if (!final && rate > 0) line += "  ETA " + format_duration(static_cast<double>(total_ - done_) / rate);
  } else {
    std::snprintf(buf, sizeof(buf), "%lld %s  %.1f %s/s", static_cast<long long>(done_), unit_.c_str(), rate, unit_.c_str());
    line += buf;
  }
  if (final) line += "  in " + format_duration(t);
  if (!extra_.empty()) line += "  " + extra_;
  std::fprintf(stderr, "\r\033[2K%s%s", line.c_str(), final ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace mimic
