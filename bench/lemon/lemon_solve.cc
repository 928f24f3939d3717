// lemon_solve: the LEMON anchor for Sluice's solver benchmarks.
//
// Usage: lemon_solve [--algo ns|cs] FILE|-
//
// Reads a min-cost-flow instance in DIMACS format ("p min N M", "n ID SUPPLY",
// "a TAIL HEAD LOW CAP COST", "c ..." comments), solves it with LEMON's
// NetworkSimplex (ns, the default; block-search pivots) or CostScaling (cs;
// partial augment-relabel, factor 16), and prints the optimal cost as
// "s COST" on stdout and "c solve time: X ms" on stderr.
//
// The time covers building the algorithm's internal structures from the
// in-memory graph and running it (what `sluice flow solve` times for its own
// solver); reading and parsing the file is not timed. It is measured with
// std::chrono::steady_clock.
//
// The reader is strict, unlike lemon::readDimacsMin (which does not check
// node numbers, arc counts or malformed numbers): every line is checked, and
// values beyond flowsolver's limits (|capacity|, |supply| <= 2^40,
// |cost| <= 2^24) are rejected, so that both solvers accept the same
// instances. Supplies must sum to zero: the problem is the balanced one
// (every supply sent, every demand met), and an unbalanced file is reported
// as infeasible.
//
// Exit status: 0 solved; 1 bad usage, unreadable or malformed input, or an
// unbounded problem; 2 infeasible.

#include <lemon/cost_scaling.h>
#include <lemon/network_simplex.h>
#include <lemon/smart_graph.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace {

typedef long long Value;  // flows, capacities, supplies
typedef long long Cost;   // costs and potentials

const Value kMaxCapacity = Value(1) << 40;  // flowsolver.MaxCapacity
const Cost kMaxAbsCost = Cost(1) << 24;     // flowsolver.MaxAbsCost

const int kExitError = 1;
const int kExitInfeasible = 2;

// Instance is a parsed DIMACS min-cost-flow problem with 0-based node
// numbers.
struct Instance {
  int nodes = 0;
  std::vector<Value> supply;
  std::vector<int> tail, head;
  std::vector<Value> lower, upper;
  std::vector<Cost> cost;
};

// ParseError carries the line a problem was found on.
struct ParseError {
  long line;
  std::string msg;
};

// Fields splits one line into its numeric fields after the leading letter and
// checks that there are exactly want of them.
class Fields {
 public:
  Fields(const char* p, const char* end, long line) : p_(p), end_(end), line_(line) {}

  long long Next(const char* what) {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\r')) ++p_;
    if (p_ == end_) throw ParseError{line_, std::string("missing ") + what};
    // strtoll needs a terminated string: copy the token.
    const char* start = p_;
    while (p_ < end_ && *p_ != ' ' && *p_ != '\t' && *p_ != '\r') ++p_;
    std::string tok(start, p_);
    errno = 0;
    char* stop = nullptr;
    long long v = std::strtoll(tok.c_str(), &stop, 10);
    if (stop == tok.c_str() || *stop != '\0' || errno == ERANGE) {
      throw ParseError{line_, std::string("bad ") + what + " \"" + tok + "\""};
    }
    return v;
  }

  void End() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\r')) ++p_;
    if (p_ != end_) throw ParseError{line_, "unexpected text after the last field"};
  }

 private:
  const char* p_;
  const char* end_;
  long line_;
};

void CheckMagnitude(long long v, long long limit, const char* what, long line) {
  if (v > limit || v < -limit) {
    throw ParseError{line, std::string(what) + " " + std::to_string(v) +
                               " beyond the limit of +-" + std::to_string(limit)};
  }
}

Instance Parse(const std::string& text) {
  Instance in;
  bool have_problem = false;
  long long want_arcs = 0;
  std::vector<bool> has_supply;
  long line = 0;
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    const char* eol = static_cast<const char*>(std::memchr(p, '\n', end - p));
    if (eol == nullptr) eol = end;
    ++line;
    const char* q = p;
    while (q < eol && (*q == ' ' || *q == '\t' || *q == '\r')) ++q;
    if (q == eol || *q == 'c') {
      p = eol + 1;
      continue;
    }
    char kind = *q;
    if (q + 1 < eol && *(q + 1) != ' ' && *(q + 1) != '\t') {
      throw ParseError{line, "unknown line type"};
    }
    Fields f(q + 1, eol, line);
    switch (kind) {
      case 'p': {
        if (have_problem) throw ParseError{line, "second problem line"};
        const char* s = q + 1;
        while (s < eol && (*s == ' ' || *s == '\t')) ++s;
        if (eol - s < 4 || std::strncmp(s, "min", 3) != 0 || (s[3] != ' ' && s[3] != '\t')) {
          throw ParseError{line, "want \"p min NODES ARCS\""};
        }
        Fields pf(s + 3, eol, line);
        long long n = pf.Next("node count");
        want_arcs = pf.Next("arc count");
        pf.End();
        if (n < 0 || n > 0x7fffffff || want_arcs < 0 || want_arcs > 0x7fffffff) {
          throw ParseError{line, "node or arc count out of range"};
        }
        in.nodes = static_cast<int>(n);
        in.supply.assign(in.nodes, 0);
        has_supply.assign(in.nodes, false);
        in.tail.reserve(want_arcs);
        in.head.reserve(want_arcs);
        in.lower.reserve(want_arcs);
        in.upper.reserve(want_arcs);
        in.cost.reserve(want_arcs);
        have_problem = true;
        break;
      }
      case 'n': {
        if (!have_problem) throw ParseError{line, "node line before the problem line"};
        long long id = f.Next("node");
        long long s = f.Next("supply");
        f.End();
        if (id < 1 || id > in.nodes) throw ParseError{line, "node " + std::to_string(id) + " out of range"};
        CheckMagnitude(s, kMaxCapacity, "supply", line);
        if (has_supply[id - 1]) throw ParseError{line, "node " + std::to_string(id) + " described twice"};
        has_supply[id - 1] = true;
        in.supply[id - 1] = s;
        break;
      }
      case 'a': {
        if (!have_problem) throw ParseError{line, "arc line before the problem line"};
        long long u = f.Next("tail");
        long long v = f.Next("head");
        long long lo = f.Next("lower bound");
        long long up = f.Next("capacity");
        long long c = f.Next("cost");
        f.End();
        if (u < 1 || u > in.nodes || v < 1 || v > in.nodes) {
          throw ParseError{line, "arc endpoint out of range"};
        }
        if (lo < 0 || lo > up) throw ParseError{line, "bounds want 0 <= lower <= capacity"};
        CheckMagnitude(up, kMaxCapacity, "capacity", line);
        CheckMagnitude(c, kMaxAbsCost, "cost", line);
        if (static_cast<long long>(in.tail.size()) == want_arcs) {
          throw ParseError{line, "more arcs than the problem line says"};
        }
        in.tail.push_back(static_cast<int>(u - 1));
        in.head.push_back(static_cast<int>(v - 1));
        in.lower.push_back(lo);
        in.upper.push_back(up);
        in.cost.push_back(c);
        break;
      }
      default:
        throw ParseError{line, "unknown line type"};
    }
    p = eol + 1;
  }
  if (!have_problem) throw ParseError{line, "no problem line"};
  if (static_cast<long long>(in.tail.size()) != want_arcs) {
    throw ParseError{line, "the problem line says " + std::to_string(want_arcs) + " arcs, the file has " +
                               std::to_string(in.tail.size())};
  }
  return in;
}

// Result is a solver's outcome: its status and, when optimal, the cost.
enum class Status { kOptimal, kInfeasible, kUnbounded };

struct Result {
  Status status;
  Cost cost;
  double ms;
};

template <typename Algo, typename Run>
Result Solve(const lemon::SmartDigraph& g, const lemon::SmartDigraph::ArcMap<Value>& lower,
             const lemon::SmartDigraph::ArcMap<Value>& upper, const lemon::SmartDigraph::ArcMap<Cost>& cost,
             const lemon::SmartDigraph::NodeMap<Value>& supply, Run run) {
  auto start = std::chrono::steady_clock::now();
  Algo algo(g);
  algo.lowerMap(lower).upperMap(upper).costMap(cost).supplyMap(supply);
  typename Algo::ProblemType t = run(algo);
  auto stop = std::chrono::steady_clock::now();
  Result r{Status::kOptimal, 0, std::chrono::duration<double, std::milli>(stop - start).count()};
  switch (t) {
    case Algo::OPTIMAL:
      r.cost = algo.totalCost();
      break;
    case Algo::INFEASIBLE:
      r.status = Status::kInfeasible;
      break;
    case Algo::UNBOUNDED:
      r.status = Status::kUnbounded;
      break;
  }
  return r;
}

int Usage() {
  std::fprintf(stderr, "usage: lemon_solve [--algo ns|cs] FILE|-\n");
  return kExitError;
}

}  // namespace

int main(int argc, char** argv) {
  std::string algo = "ns";
  std::string path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--algo" && i + 1 < argc) {
      algo = argv[++i];
    } else if (a.rfind("--algo=", 0) == 0) {
      algo = a.substr(7);
    } else if (path.empty() && (a == "-" || a[0] != '-')) {
      path = a;
    } else {
      return Usage();
    }
  }
  if (path.empty() || (algo != "ns" && algo != "cs")) return Usage();

  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
      std::fprintf(stderr, "lemon_solve: cannot open %s: %s\n", path.c_str(), std::strerror(errno));
      return kExitError;
    }
    std::ostringstream ss;
    ss << f.rdbuf();
    text = ss.str();
  }

  Instance in;
  try {
    in = Parse(text);
  } catch (const ParseError& e) {
    std::fprintf(stderr, "lemon_solve: %s:%ld: %s\n", path.c_str(), e.line, e.msg.c_str());
    return kExitError;
  }
  text.clear();
  text.shrink_to_fit();

  __int128 balance = 0;
  for (Value s : in.supply) balance += s;
  if (balance != 0) {
    std::fprintf(stderr, "lemon_solve: infeasible: supplies do not sum to 0\n");
    return kExitInfeasible;
  }

  lemon::SmartDigraph g;
  g.reserveNode(in.nodes);
  g.reserveArc(static_cast<int>(in.tail.size()));
  std::vector<lemon::SmartDigraph::Node> node(in.nodes);
  for (int i = 0; i < in.nodes; ++i) node[i] = g.addNode();
  lemon::SmartDigraph::NodeMap<Value> supply(g);
  for (int i = 0; i < in.nodes; ++i) supply[node[i]] = in.supply[i];
  lemon::SmartDigraph::ArcMap<Value> lower(g), upper(g);
  lemon::SmartDigraph::ArcMap<Cost> cost(g);
  for (size_t i = 0; i < in.tail.size(); ++i) {
    lemon::SmartDigraph::Arc a = g.addArc(node[in.tail[i]], node[in.head[i]]);
    lower[a] = in.lower[i];
    upper[a] = in.upper[i];
    cost[a] = in.cost[i];
  }
  in = Instance();

  Result r;
  if (algo == "ns") {
    typedef lemon::NetworkSimplex<lemon::SmartDigraph, Value, Cost> NS;
    r = Solve<NS>(g, lower, upper, cost, supply, [](NS& ns) { return ns.run(NS::BLOCK_SEARCH); });
  } else {
    typedef lemon::CostScaling<lemon::SmartDigraph, Value, Cost> CS;
    r = Solve<CS>(g, lower, upper, cost, supply, [](CS& cs) { return cs.run(CS::PARTIAL_AUGMENT, 16); });
  }

  std::fprintf(stderr, "c algo: %s\n", algo == "ns" ? "lemon network simplex" : "lemon cost scaling");
  std::fprintf(stderr, "c solve time: %.3f ms\n", r.ms);
  switch (r.status) {
    case Status::kOptimal:
      std::printf("s %lld\n", r.cost);
      return 0;
    case Status::kInfeasible:
      std::fprintf(stderr, "lemon_solve: infeasible\n");
      return kExitInfeasible;
    case Status::kUnbounded:
      std::fprintf(stderr, "lemon_solve: unbounded\n");
      return kExitError;
  }
  return kExitError;
}
