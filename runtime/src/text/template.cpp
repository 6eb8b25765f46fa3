// template.cpp - the Jinja subset of chat templates (template.h).
//
// What is implemented, as Jinja 3 with trim_blocks and lstrip_blocks (transformers'
// environment) computes it:
//   * text, {{ expr }}, {% stmt %}, {# comment #}, whitespace control (`{%-`, `-%}`, `{{-`, ...);
//   * statements: for (one name or a tuple; `if` filter; else; loop.index, index0, revindex,
//     revindex0, first, last, length, previtem, nextitem), if / elif / else, set (a name, a
//     namespace attribute, or a block), break and continue, generation blocks (their body);
//   * expressions: literals (strings, numbers, true / false / none in either case, lists,
//     dicts), names, attributes and subscripts, slices, calls; `not`, `and`, `or`, comparisons,
//     `in` / `not in`, + - * / // % ~, the conditional `a if c else b`;
//   * filters: trim, length / count, tojson, default / d, upper, lower, capitalize, title,
//     string, int, float, join, first, last, list, items, replace, safe, map(attribute=),
//     selectattr / rejectattr, reverse; tests: defined, undefined, none, string, number,
//     integer, float, boolean, true, false, mapping, iterable, sequence, equalto / eq, odd,
//     even, in;
//   * functions: raise_exception, strftime_now, namespace, range, dict; string methods strip,
//     lstrip, rstrip, split, startswith, endswith, upper, lower, title, capitalize, replace,
//     format is not; dict methods items, keys, values, get.
// Anything else is an error naming the construct and the template's line.
#include "template.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <cmath>
#include <ctime>
#include <functional>
#include <map>
#include <memory>

#include "../internal.h"

using json = nlohmann::json;

namespace kilnrt::text {
namespace {

constexpr size_t kMaxText = 16u << 20;  // a rendering (or a string it builds) at most 16 MiB

struct TemplateError {
  std::string msg;
  int line;
};

// ---------------------------------------------------------------- values
struct Val {
  json j;
  bool undef = false;
  static Val undefined() { return {json(), true}; }
};
bool truthy(const Val &v) {
  if (v.undef || v.j.is_null()) return false;
  if (v.j.is_boolean()) return v.j.get<bool>();
  if (v.j.is_number_integer()) return v.j.get<int64_t>() != 0;
  if (v.j.is_number()) return v.j.get<double>() != 0;
  if (v.j.is_string()) return !v.j.get_ref<const std::string &>().empty();
  return !v.j.empty();
}

// Python's json.dumps (transformers' tojson): ", " and ": " separators, non-ASCII kept.
void dumps(const json &j, std::string &out, int indent, int depth) {
  auto nl = [&](int d) {
    if (indent < 0) return;
    out += '\n';
    out.append((size_t)(indent * d), ' ');
  };
  if (j.is_object()) {
    if (j.empty()) return void(out += "{}");
    out += '{';
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!first) out += indent < 0 ? ", " : ",";
      first = false;
      nl(depth + 1);
      out += json(it.key()).dump(-1, ' ', false, json::error_handler_t::replace);
      out += ": ";
      dumps(it.value(), out, indent, depth + 1);
    }
    nl(depth);
    out += '}';
  } else if (j.is_array()) {
    if (j.empty()) return void(out += "[]");
    out += '[';
    for (size_t i = 0; i < j.size(); ++i) {
      if (i) out += indent < 0 ? ", " : ",";
      nl(depth + 1);
      dumps(j[i], out, indent, depth + 1);
    }
    nl(depth);
    out += ']';
  } else if (j.is_number_float()) {
    double d = j.get<double>();
    char buf[40];
    snprintf(buf, sizeof buf, "%.17g", d);
    for (int p = 1; p <= 17; ++p) {  // the shortest repr that reads back (Python's float repr)
      snprintf(buf, sizeof buf, "%.*g", p, d);
      if (strtod(buf, nullptr) == d) break;
    }
    std::string s = buf;
    if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
    out += s;
  } else {
    out += j.dump(-1, ' ', false, json::error_handler_t::replace);
  }
}

// A value as {{ }} prints it (Python's str()).
std::string str(const Val &v) {
  if (v.undef || v.j.is_null()) return v.undef ? "" : "None";
  if (v.j.is_string()) return v.j.get<std::string>();
  if (v.j.is_boolean()) return v.j.get<bool>() ? "True" : "False";
  std::string s;
  if (v.j.is_number()) {
    dumps(v.j, s, -1, 0);
    return s;
  }
  // lists and dicts as Python prints them: strings in single quotes
  std::function<void(const json &)> repr = [&](const json &x) {
    if (x.is_string()) {
      s += '\'';
      for (char c : x.get<std::string>()) s += c == '\'' ? std::string("\\'") : c == '\n' ? std::string("\\n") : std::string(1, c);
      s += '\'';
    } else if (x.is_array()) {
      s += '[';
      for (size_t i = 0; i < x.size(); ++i) s += i ? ", " : "", repr(x[i]);
      s += ']';
    } else if (x.is_object()) {
      s += '{';
      bool first = true;
      for (auto it = x.begin(); it != x.end(); ++it) s += first ? "" : ", ", first = false, repr(it.key()), s += ": ", repr(it.value());
      s += '}';
    } else {
      s += str(Val{x});
    }
  };
  repr(v.j);
  return s;
}

// ---------------------------------------------------------------- expressions
struct Tok {
  enum Kind { Name, Int, Float, Str, Op, End } kind;
  std::string s;
};

std::vector<Tok> lexExpr(const std::string &src, int line) {
  std::vector<Tok> out;
  size_t i = 0;
  while (i < src.size()) {
    char c = src[i];
    if (isspace((unsigned char)c)) {
      ++i;
    } else if (isalpha((unsigned char)c) || c == '_') {
      size_t b = i;
      while (i < src.size() && (isalnum((unsigned char)src[i]) || src[i] == '_')) ++i;
      out.push_back({Tok::Name, src.substr(b, i - b)});
    } else if (isdigit((unsigned char)c)) {
      size_t b = i;
      while (i < src.size() && isdigit((unsigned char)src[i])) ++i;
      bool fl = i + 1 < src.size() && src[i] == '.' && isdigit((unsigned char)src[i + 1]);
      if (fl) {
        ++i;
        while (i < src.size() && isdigit((unsigned char)src[i])) ++i;
      }
      out.push_back({fl ? Tok::Float : Tok::Int, src.substr(b, i - b)});
    } else if (c == '\'' || c == '"') {
      std::string s;
      ++i;
      while (i < src.size() && src[i] != c) {
        if (src[i] == '\\' && i + 1 < src.size()) {
          char e = src[++i];
          s += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
        } else {
          s += src[i];
        }
        ++i;
      }
      if (i >= src.size()) throw TemplateError{"a string is not closed", line};
      ++i;
      out.push_back({Tok::Str, s});
    } else {
      static const char *ops[] = {"**", "//", "==", "!=", "<=", ">=", "(", ")", "[", "]", "{", "}", ".", ",", ":",
                                  "|",  "~",  "+",  "-",  "*",  "/",  "%", "<", ">", "="};
      bool hit = false;
      for (const char *o : ops)
        if (src.compare(i, strlen(o), o) == 0) {
          out.push_back({Tok::Op, o});
          i += strlen(o);
          hit = true;
          break;
        }
      if (!hit) throw TemplateError{std::string("unexpected character '") + c + "'", line};
    }
  }
  out.push_back({Tok::End, ""});
  return out;
}

struct Expr;
using ExprP = std::shared_ptr<Expr>;
struct Expr {
  enum Kind { Lit, Name, List, Dict, Attr, Index, Slice, Call, Filter, Test, Unary, Binary, Cond } kind;
  std::string s;            // name, attribute, operator, filter or test
  Val lit;
  std::vector<ExprP> args;  // operands; a call's positional arguments
  std::vector<std::pair<std::string, ExprP>> kwargs;
  bool negate = false;      // `is not`
};

class ExprParser {
 public:
  ExprParser(std::vector<Tok> t, int line) : t_(std::move(t)), line_(line) {}
  const Tok &peek(size_t k = 0) const { return t_[std::min(at_ + k, t_.size() - 1)]; }
  bool isOp(const char *o, size_t k = 0) const { return peek(k).kind == Tok::Op && peek(k).s == o; }
  bool isName(const char *n, size_t k = 0) const { return peek(k).kind == Tok::Name && peek(k).s == n; }
  bool atEnd() const { return peek().kind == Tok::End; }
  Tok next() { return t_[std::min(at_++, t_.size() - 1)]; }
  void expectOp(const char *o) {
    if (!isOp(o)) fail(std::string("expected '") + o + "'");
    ++at_;
  }
  std::string name() {
    if (peek().kind != Tok::Name) fail("expected a name");
    return next().s;
  }
  [[noreturn]] void fail(const std::string &what) const {
    throw TemplateError{what + (atEnd() ? " at the end of the tag" : " near '" + peek().s + "'"), line_};
  }
  int line() const { return line_; }

  struct Depth {  // nesting bounded: a hostile template cannot exhaust the stack
    int &d;
    Depth(int &x, const ExprParser &p) : d(x) {
      if (++d > 64) p.fail("expressions nested deeper than 64");
    }
    ~Depth() { --d; }
  };
  ExprP expr() {  // a if c else b
    Depth guard(depth_, *this);
    ExprP e = orExpr();
    if (isName("if")) {
      ++at_;
      auto c = std::make_shared<Expr>(Expr{Expr::Cond});
      c->args = {e, orExpr()};
      if (isName("else")) {
        ++at_;
        c->args.push_back(expr());
      }
      return c;
    }
    return e;
  }
  // An expression without a trailing `if` (a for loop's iterable, before its filter).
  ExprP orExpr() {
    ExprP l = andExpr();
    while (isName("or")) ++at_, l = bin("or", l, andExpr());
    return l;
  }

 private:
  ExprP bin(const std::string &op, ExprP a, ExprP b) {
    auto e = std::make_shared<Expr>(Expr{Expr::Binary, op});
    e->args = {std::move(a), std::move(b)};
    return e;
  }
  ExprP andExpr() {
    ExprP l = notExpr();
    while (isName("and")) ++at_, l = bin("and", l, notExpr());
    return l;
  }
  ExprP notExpr() {
    Depth guard(depth_, *this);
    if (isName("not")) {
      ++at_;
      auto e = std::make_shared<Expr>(Expr{Expr::Unary, "not"});
      e->args = {notExpr()};
      return e;
    }
    return compare();
  }
  ExprP compare() {
    ExprP l = math1();
    for (;;) {
      static const char *ops[] = {"==", "!=", "<=", ">=", "<", ">"};
      std::string op;
      for (const char *o : ops)
        if (isOp(o)) op = o;
      if (!op.empty()) ++at_;
      else if (isName("in")) ++at_, op = "in";
      else if (isName("not") && isName("in", 1)) at_ += 2, op = "not in";
      else return l;
      l = bin(op, l, math1());
    }
  }
  ExprP math1() {
    ExprP l = concat();
    while (isOp("+") || isOp("-")) {
      std::string op = next().s;
      l = bin(op, l, concat());
    }
    return l;
  }
  ExprP concat() {
    ExprP l = math2();
    while (isOp("~")) ++at_, l = bin("~", l, math2());
    return l;
  }
  ExprP math2() {
    ExprP l = unary();
    while (isOp("*") || isOp("/") || isOp("//") || isOp("%")) {
      std::string op = next().s;
      l = bin(op, l, unary());
    }
    return l;
  }
  ExprP unary() {
    Depth guard(depth_, *this);
    if (isOp("-") || isOp("+")) {
      std::string op = next().s;
      auto e = std::make_shared<Expr>(Expr{Expr::Unary, op});
      e->args = {unary()};
      return e;
    }
    return filters(postfix(primary()));
  }
  void callArgs(Expr &e) {  // after '('
    while (!isOp(")")) {
      if (peek().kind == Tok::Name && isOp("=", 1)) {
        std::string k = next().s;
        ++at_;
        e.kwargs.push_back({k, expr()});
      } else {
        e.args.push_back(expr());
      }
      if (!isOp(",")) break;
      ++at_;
    }
    expectOp(")");
  }
  ExprP filters(ExprP e) {
    for (;;) {
      if (isOp("|")) {
        ++at_;
        auto f = std::make_shared<Expr>(Expr{Expr::Filter, name()});
        f->args = {e};
        if (isOp("(")) ++at_, callArgs(*f);
        e = f;
      } else if (isName("is")) {
        ++at_;
        auto t = std::make_shared<Expr>(Expr{Expr::Test});
        if (isName("not")) ++at_, t->negate = true;
        t->s = peek().kind == Tok::Op && (peek().s == "==" || peek().s == "!=") ? next().s : name();
        t->args = {e};
        if (isOp("(")) ++at_, callArgs(*t);
        else if (!atEnd() && (peek().kind == Tok::Str || peek().kind == Tok::Int || peek().kind == Tok::Float ||
                              (peek().kind == Tok::Name && !isName("and") && !isName("or") && !isName("else") && !isName("if"))))
          t->args.push_back(primary());  // `is equalto 3`, `is in x`
        e = t;
      } else {
        return e;
      }
    }
  }
  ExprP postfix(ExprP e) {
    for (;;) {
      if (isOp(".")) {
        ++at_;
        auto a = std::make_shared<Expr>(Expr{Expr::Attr, name()});
        a->args = {e};
        e = a;
      } else if (isOp("[")) {
        ++at_;
        ExprP lo, hi, step;
        bool slice = false;
        if (!isOp(":")) lo = expr();
        if (isOp(":")) {
          slice = true;
          ++at_;
          if (!isOp(":") && !isOp("]")) hi = expr();
          if (isOp(":")) {
            ++at_;
            if (!isOp("]")) step = expr();
          }
        }
        expectOp("]");
        auto s = std::make_shared<Expr>(Expr{slice ? Expr::Slice : Expr::Index});
        s->args = {e, lo, hi, step};
        e = s;
      } else if (isOp("(")) {
        ++at_;
        auto c = std::make_shared<Expr>(Expr{Expr::Call});
        c->args = {e};
        callArgs(*c);
        e = c;
      } else {
        return e;
      }
    }
  }
  ExprP primary() {
    Tok t = next();
    auto lit = [](json j) {
      auto e = std::make_shared<Expr>(Expr{Expr::Lit});
      e->lit = Val{std::move(j)};
      return e;
    };
    switch (t.kind) {
      case Tok::Int: {
        errno = 0;
        long long v = strtoll(t.s.c_str(), nullptr, 10);
        if (errno == ERANGE) fail("the integer " + t.s + " is out of range");
        return lit(json((int64_t)v));
      }
      case Tok::Float: return lit(json(strtod(t.s.c_str(), nullptr)));
      case Tok::Str: {
        std::string s = t.s;
        while (peek().kind == Tok::Str) s += next().s;  // adjacent literals concatenate
        return lit(json(s));
      }
      case Tok::Name:
        if (t.s == "true" || t.s == "True") return lit(json(true));
        if (t.s == "false" || t.s == "False") return lit(json(false));
        if (t.s == "none" || t.s == "None") return lit(json(nullptr));
        return std::make_shared<Expr>(Expr{Expr::Name, t.s});
      case Tok::Op:
        if (t.s == "(") {
          ExprP e = expr();
          if (isOp(",")) fail("tuples are not supported");
          expectOp(")");
          return e;
        }
        if (t.s == "[") {
          auto l = std::make_shared<Expr>(Expr{Expr::List});
          while (!isOp("]")) {
            l->args.push_back(expr());
            if (!isOp(",")) break;
            ++at_;
          }
          expectOp("]");
          return l;
        }
        if (t.s == "{") {
          auto d = std::make_shared<Expr>(Expr{Expr::Dict});
          while (!isOp("}")) {
            d->args.push_back(expr());
            expectOp(":");
            d->args.push_back(expr());
            if (!isOp(",")) break;
            ++at_;
          }
          expectOp("}");
          return d;
        }
        [[fallthrough]];
      default:
        --at_;
        fail("expected a value");
    }
  }

  std::vector<Tok> t_;
  size_t at_ = 0;
  int line_;
  int depth_ = 0;
};

// ---------------------------------------------------------------- statements
struct Node;
using Body = std::vector<std::shared_ptr<Node>>;
struct Node {
  enum Kind { Text, Out, If, For, Set, SetBlock, Break, Continue } kind;
  int line = 0;
  std::string text;                          // Text; Set/SetBlock: the name; For: loop vars (comma-joined)
  std::string attr;                          // Set: a namespace attribute
  std::vector<std::pair<ExprP, Body>> branches;  // If (a null condition: else)
  ExprP e, cond;                             // Out / Set value / For iterable and filter
  Body body, otherwise;                      // For, SetBlock
};

struct Seg {
  enum Kind { Text, Expr, Stmt } kind;
  std::string s;
  int line;
};

std::vector<Seg> segments(const std::string &src) {
  std::vector<Seg> out;
  size_t i = 0;
  int line = 1;
  bool trimNext = false;     // `-%}` / `-}}`: strip the next text's leading whitespace
  bool trimNewline = false;  // trim_blocks: the newline right after a block tag goes
  bool lineStarting = true;  // the text starts a line (the template's start, or a block tag's newline)
  auto countLines = [&](size_t a, size_t b) {
    for (size_t k = a; k < b; ++k) line += src[k] == '\n';
  };
  while (i <= src.size()) {
    size_t open = std::string::npos;
    for (size_t k = i; k + 1 < src.size(); ++k)
      if (src[k] == '{' && (src[k + 1] == '{' || src[k + 1] == '%' || src[k + 1] == '#')) {
        open = k;
        break;
      }
    const size_t textEnd = open == std::string::npos ? src.size() : open;
    std::string text = src.substr(i, textEnd - i);
    int textLine = line;
    countLines(i, textEnd);
    if (trimNext) {
      size_t b = 0;
      while (b < text.size() && isspace((unsigned char)text[b])) ++b;
      text.erase(0, b);
    } else if (trimNewline && !text.empty() && text[0] == '\n') {
      text.erase(0, 1);
      lineStarting = true;
    }
    trimNext = trimNewline = false;
    if (open == std::string::npos) {
      if (!text.empty()) out.push_back({Seg::Text, text, textLine});
      break;
    }
    char kind = src[open + 1];
    size_t p = open + 2;
    bool stripBefore = p < src.size() && src[p] == '-', keepBefore = p < src.size() && src[p] == '+';
    if (stripBefore || keepBefore) ++p;
    if (stripBefore) {
      while (!text.empty() && isspace((unsigned char)text.back())) text.pop_back();
    } else if (kind != '{' && !keepBefore) {  // lstrip_blocks: only spaces and tabs before the tag on its line
      size_t nl = text.rfind('\n'), from = nl == std::string::npos ? 0 : nl + 1;
      if ((nl != std::string::npos || lineStarting) && text.find_first_not_of(" \t", from) == std::string::npos) text.erase(from);
    }
    if (!text.empty()) out.push_back({Seg::Text, text, textLine});
    // the tag's end, outside strings
    const char closer = kind == '{' ? '}' : kind == '%' ? '%' : '#';
    size_t q = p;
    char quote = 0;
    for (; q + 1 < src.size(); ++q) {
      if (kind != '#' && quote) {
        if (src[q] == '\\') ++q;
        else if (src[q] == quote) quote = 0;
        continue;
      }
      if (kind != '#' && (src[q] == '\'' || src[q] == '"')) quote = src[q];
      else if (src[q] == closer && src[q + 1] == '}') break;
    }
    if (q + 1 >= src.size()) throw TemplateError{std::string("a '{") + kind + "' tag is not closed", line};
    size_t endBody = q;
    bool stripAfter = endBody > p && src[endBody - 1] == '-';
    if (stripAfter) --endBody;
    std::string body = src.substr(p, endBody - p);
    if (kind == '{') out.push_back({Seg::Expr, body, line});
    else if (kind == '%') out.push_back({Seg::Stmt, body, line});
    countLines(open, q + 2);
    i = q + 2;
    trimNext = stripAfter;
    trimNewline = !stripAfter && kind != '{';
    lineStarting = false;
  }
  return out;
}

class Parser {
 public:
  explicit Parser(std::vector<Seg> s) : s_(std::move(s)) {}
  Body parse() {
    std::string end;
    Body b = block({}, end);
    if (!end.empty()) throw TemplateError{"'" + end + "' without its opening statement", s_[at_ - 1].line};
    return b;
  }

 private:
  // Nodes until one of `ends` (the word that ended it in `end`; "" at the template's end).
  Body block(const std::vector<std::string> &ends, std::string &end) {
    if (++depth_ > 64) throw TemplateError{"statements nested deeper than 64", at_ < s_.size() ? s_[at_].line : 0};
    struct Leave {
      int &d;
      ~Leave() { --d; }
    } leave{depth_};
    Body out;
    while (at_ < s_.size()) {
      const Seg &g = s_[at_++];
      if (g.kind == Seg::Text) {
        out.push_back(std::make_shared<Node>(Node{Node::Text, g.line, g.s}));
        continue;
      }
      ExprParser p(lexExpr(g.s, g.line), g.line);
      if (g.kind == Seg::Expr) {
        auto n = std::make_shared<Node>(Node{Node::Out, g.line});
        n->e = p.expr();
        if (!p.atEnd()) p.fail("unexpected text after the expression");
        out.push_back(n);
        continue;
      }
      std::string word = p.name();
      if (std::find(ends.begin(), ends.end(), word) != ends.end()) {
        end = word;
        cur_ = std::make_unique<ExprParser>(std::move(p));
        return out;
      }
      if (word == "if") out.push_back(ifNode(p, g.line));
      else if (word == "for") out.push_back(forNode(p, g.line));
      else if (word == "set") out.push_back(setNode(p, g.line));
      else if (word == "break" || word == "continue") out.push_back(std::make_shared<Node>(Node{word == "break" ? Node::Break : Node::Continue, g.line}));
      else if (word == "generation") {  // transformers' assistant-mask marker: its body, as it is
        std::string e;
        Body b = block({"endgeneration"}, e);
        if (e.empty()) throw TemplateError{"'generation' without 'endgeneration'", g.line};
        out.insert(out.end(), b.begin(), b.end());
      } else {
        throw TemplateError{"the statement '" + word + "' is not supported (kiln's Jinja subset)", g.line};
      }
    }
    end.clear();
    return out;
  }
  std::shared_ptr<Node> ifNode(ExprParser &p, int line) {
    auto n = std::make_shared<Node>(Node{Node::If, line});
    ExprP c = p.expr();
    for (;;) {
      std::string end;
      Body b = block({"elif", "else", "endif"}, end);
      n->branches.push_back({c, b});
      if (end.empty()) throw TemplateError{"'if' without 'endif'", line};
      if (end == "endif") return n;
      c = end == "elif" ? cur_->expr() : nullptr;
      if (end == "else") {
        Body e = block({"endif"}, end);
        if (end.empty()) throw TemplateError{"'if' without 'endif'", line};
        n->branches.push_back({nullptr, e});
        return n;
      }
    }
  }
  std::shared_ptr<Node> forNode(ExprParser &p, int line) {
    auto n = std::make_shared<Node>(Node{Node::For, line});
    n->text = p.name();
    while (p.isOp(",")) p.next(), n->text += "," + p.name();
    if (!p.isName("in")) p.fail("expected 'in'");
    p.next();
    n->e = p.orExpr();
    if (p.isName("if")) p.next(), n->cond = p.orExpr();
    if (p.isName("recursive")) p.fail("recursive loops are not supported");
    if (!p.atEnd()) p.fail("unexpected text in 'for'");
    std::string end;
    n->body = block({"else", "endfor"}, end);
    if (end == "else") n->otherwise = block({"endfor"}, end);
    if (end != "endfor") throw TemplateError{"'for' without 'endfor'", line};
    return n;
  }
  std::shared_ptr<Node> setNode(ExprParser &p, int line) {
    auto n = std::make_shared<Node>(Node{Node::Set, line});
    n->text = p.name();
    if (p.isOp(".")) p.next(), n->attr = p.name();
    if (p.isOp(",")) p.fail("tuple assignment is not supported");
    if (p.atEnd()) {  // {% set x %}...{% endset %}
      n->kind = Node::SetBlock;
      std::string end;
      n->body = block({"endset"}, end);
      if (end.empty()) throw TemplateError{"'set' without 'endset'", line};
      return n;
    }
    p.expectOp("=");
    n->e = p.expr();
    if (!p.atEnd()) p.fail("unexpected text after 'set'");
    return n;
  }

  std::vector<Seg> s_;
  size_t at_ = 0;
  int depth_ = 0;
  std::unique_ptr<ExprParser> cur_;  // the statement that ended the last block (elif's condition)
};

// ---------------------------------------------------------------- evaluation
struct LoopControl {
  bool brk;
};

class Renderer {
 public:
  explicit Renderer(const json &ctx) {
    scopes_.emplace_back();
    for (auto it = ctx.begin(); it != ctx.end(); ++it) scopes_.back()[it.key()] = Val{it.value()};
  }
  void run(const Body &b, std::string &out) {
    for (const auto &n : b) node(*n, out);
  }

 private:
  [[noreturn]] void fail(const std::string &what) { throw TemplateError{what, line_}; }

  Val *lookup(const std::string &n) {
    for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s)
      if (auto it = s->find(n); it != s->end()) return &it->second;
    return nullptr;
  }

  void node(const Node &n, std::string &out) {
    line_ = n.line;
    if (n.kind == Node::Text) out += n.text;
    if (n.kind == Node::Out) out += str(eval(*n.e));
    if (out.size() > kMaxText) fail("the rendered text is longer than 16 MiB");
    switch (n.kind) {
      case Node::Text:
      case Node::Out: break;
      case Node::If:
        for (const auto &[c, b] : n.branches)
          if (!c || truthy(eval(*c))) {
            run(b, out);
            break;
          }
        break;
      case Node::Set: {
        Val v = eval(*n.e);
        if (n.attr.empty()) {
          scopes_.back()[n.text] = v;
        } else {
          Val *ns = lookup(n.text);
          if (!ns || !ns->j.is_object() || !ns->j.contains("__namespace__"))
            fail("'set " + n.text + "." + n.attr + "': '" + n.text + "' is not a namespace");
          ns->j[n.attr] = v.j;
        }
        break;
      }
      case Node::SetBlock: {
        std::string s;
        run(n.body, s);
        scopes_.back()[n.text] = Val{json(s)};
        break;
      }
      case Node::Break: throw LoopControl{true};
      case Node::Continue: throw LoopControl{false};
      case Node::For: forLoop(n, out); break;
    }
  }

  void forLoop(const Node &n, std::string &out) {
    Val seq = eval(*n.e);
    std::vector<json> items;
    if (seq.j.is_array()) items.assign(seq.j.begin(), seq.j.end());
    else if (seq.j.is_object()) for (auto it = seq.j.begin(); it != seq.j.end(); ++it) items.push_back(it.key());
    else if (seq.j.is_string()) for (char c : seq.j.get<std::string>()) items.push_back(std::string(1, c));
    else if (!seq.undef && !seq.j.is_null()) fail("'for' over " + std::string(seq.j.type_name()) + ", which is not iterable");
    std::vector<std::string> vars;
    for (size_t b = 0, e; b <= n.text.size(); b = e + 1) {
      e = n.text.find(',', b);
      if (e == std::string::npos) e = n.text.size();
      vars.push_back(n.text.substr(b, e - b));
    }
    auto bind = [&](std::map<std::string, Val> &scope, const json &item) {
      if (vars.size() == 1) return void(scope[vars[0]] = Val{item});
      if (!item.is_array() || item.size() != vars.size()) fail("'for " + n.text + "': an item does not unpack into " + std::to_string(vars.size()));
      for (size_t k = 0; k < vars.size(); ++k) scope[vars[k]] = Val{item[k]};
    };
    if (n.cond) {  // the filter sees the item, not loop
      std::vector<json> kept;
      for (const json &it : items) {
        scopes_.emplace_back();
        bind(scopes_.back(), it);
        bool keep = truthy(eval(*n.cond));
        scopes_.pop_back();
        if (keep) kept.push_back(it);
      }
      items = std::move(kept);
    }
    if (items.empty()) return run(n.otherwise, out);
    const int64_t len = (int64_t)items.size();
    for (int64_t i = 0; i < len; ++i) {
      scopes_.emplace_back();
      bind(scopes_.back(), items[i]);
      json loop = {{"index", i + 1}, {"index0", i}, {"revindex", len - i}, {"revindex0", len - i - 1},
                   {"first", i == 0}, {"last", i == len - 1}, {"length", len}};
      loop["previtem"] = i > 0 ? items[i - 1] : json();
      loop["nextitem"] = i + 1 < len ? items[i + 1] : json();
      scopes_.back()["loop"] = Val{loop};
      try {
        run(n.body, out);
      } catch (const LoopControl &c) {
        scopes_.pop_back();
        if (c.brk) return;
        continue;
      }
      scopes_.pop_back();
    }
  }

  static int64_t toInt(const Val &v) {
    if (v.j.is_number_integer()) return v.j.get<int64_t>();
    if (v.j.is_number()) {
      double d = v.j.get<double>();
      return std::isfinite(d) && std::abs(d) < 9e18 ? (int64_t)d : 0;
    }
    return 0;
  }

  Val eval(const Expr &e) {
    switch (e.kind) {
      case Expr::Lit: return e.lit;
      case Expr::Name: {
        if (Val *v = lookup(e.s)) return *v;
        return Val::undefined();
      }
      case Expr::List: {
        json a = json::array();
        for (auto &x : e.args) a.push_back(eval(*x).j);
        return Val{a};
      }
      case Expr::Dict: {
        json d = json::object();
        for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
          Val key = eval(*e.args[k]);
          if (!key.j.is_string()) fail("a dict key is not a string");
          d[key.j.get<std::string>()] = eval(*e.args[k + 1]).j;
        }
        return Val{d};
      }
      case Expr::Attr: return member(eval(*e.args[0]), json(e.s));
      case Expr::Index: return member(eval(*e.args[0]), eval(*e.args[1]).j);
      case Expr::Slice: return slice(e);
      case Expr::Call: return call(e);
      case Expr::Filter: return filter(e);
      case Expr::Test: {
        bool r = test(e);
        return Val{json(e.negate ? !r : r)};
      }
      case Expr::Unary: {
        Val v = eval(*e.args[0]);
        if (e.s == "not") return Val{json(!truthy(v))};
        if (!v.j.is_number()) fail("unary " + e.s + " of a " + std::string(v.j.type_name()));
        if (e.s == "+") return v;
        if (v.j.is_number_integer() && v.j.get<int64_t>() == INT64_MIN) fail("integer overflow in unary -");
        return v.j.is_number_integer() ? Val{json(-v.j.get<int64_t>())} : Val{json(-v.j.get<double>())};
      }
      case Expr::Cond: {
        if (truthy(eval(*e.args[1]))) return eval(*e.args[0]);
        return e.args.size() > 2 ? eval(*e.args[2]) : Val::undefined();
      }
      case Expr::Binary: return binary(e);
    }
    fail("unknown expression");
  }

  Val member(const Val &obj, const json &key) {
    if (obj.j.is_object() && key.is_string()) {
      auto it = obj.j.find(key.get<std::string>());
      if (it != obj.j.end()) return Val{*it};
      static const char *methods[] = {"items", "keys", "values", "get"};
      if (std::find(std::begin(methods), std::end(methods), key.get<std::string>()) == std::end(methods)) return Val::undefined();
    }
    if ((obj.j.is_array() || obj.j.is_string()) && key.is_number_integer()) {
      int64_t n = obj.j.is_array() ? (int64_t)obj.j.size() : (int64_t)obj.j.get_ref<const std::string &>().size();
      int64_t i = key.get<int64_t>();
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Val::undefined();
      return obj.j.is_array() ? Val{obj.j[(size_t)i]} : Val{json(obj.j.get<std::string>().substr((size_t)i, 1))};
    }
    if (key.is_string()) {  // a method: resolved by the call
      json m = {{"__method__", key}, {"__self__", obj.j}};
      return Val{m};
    }
    return Val::undefined();
  }

  Val slice(const Expr &e) {
    Val v = eval(*e.args[0]);
    int64_t n = v.j.is_array() ? (int64_t)v.j.size() : v.j.is_string() ? (int64_t)v.j.get_ref<const std::string &>().size() : -1;
    if (n < 0) fail("a slice of a " + std::string(v.j.type_name()));
    int64_t step = e.args[3] ? toInt(eval(*e.args[3])) : 1;
    if (step == 0) fail("a slice step of 0");
    auto bound = [&](const ExprP &x, int64_t dflt) {
      if (!x) return dflt;
      int64_t i = toInt(eval(*x));
      if (i < 0) i += n;
      return step > 0 ? std::clamp<int64_t>(i, 0, n) : std::clamp<int64_t>(i, -1, n - 1);
    };
    int64_t lo = bound(e.args[1], step > 0 ? 0 : n - 1), hi = bound(e.args[2], step > 0 ? n : -1);
    json out = v.j.is_array() ? json::array() : json("");
    for (int64_t i = lo; step > 0 ? i < hi : i > hi;) {
      if (v.j.is_array()) out.push_back(v.j[(size_t)i]);
      else out.get_ref<std::string &>() += v.j.get_ref<const std::string &>()[(size_t)i];
      if (__builtin_add_overflow(i, step, &i)) break;
    }
    return Val{out};
  }

  Val binary(const Expr &e) {
    if (e.s == "and") {
      Val a = eval(*e.args[0]);
      return truthy(a) ? eval(*e.args[1]) : a;
    }
    if (e.s == "or") {
      Val a = eval(*e.args[0]);
      return truthy(a) ? a : eval(*e.args[1]);
    }
    Val a = eval(*e.args[0]), b = eval(*e.args[1]);
    const std::string &op = e.s;
    if (op == "~") return Val{json(str(a) + str(b))};
    if (op == "==") return Val{json(a.j == b.j && a.undef == b.undef)};
    if (op == "!=") return Val{json(!(a.j == b.j && a.undef == b.undef))};
    if (op == "in" || op == "not in") {
      bool in = false;
      if (b.j.is_string() && a.j.is_string()) in = b.j.get<std::string>().find(a.j.get<std::string>()) != std::string::npos;
      else if (b.j.is_array()) in = std::find(b.j.begin(), b.j.end(), a.j) != b.j.end();
      else if (b.j.is_object() && a.j.is_string()) in = b.j.contains(a.j.get<std::string>());
      else if (!b.undef) fail("'in' on a " + std::string(b.j.type_name()));
      return Val{json(op == "in" ? in : !in)};
    }
    if (op == "+" && a.j.is_string() && b.j.is_string()) return Val{json(a.j.get<std::string>() + b.j.get<std::string>())};
    if (op == "+" && a.j.is_array() && b.j.is_array()) {
      json r = a.j;
      r.insert(r.end(), b.j.begin(), b.j.end());
      return Val{r};
    }
    if (op == "*" && a.j.is_string() && b.j.is_number_integer()) {
      std::string r;
      const std::string &piece = a.j.get_ref<const std::string &>();
      int64_t times = b.j.get<int64_t>();
      if (times > 0 && piece.size() * (uint64_t)std::min<int64_t>(times, 1 << 30) > kMaxText) fail("a string longer than 16 MiB");
      for (int64_t k = 0; k < times; ++k) r += piece;
      return Val{json(r)};
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int c;
      if (a.j.is_string() && b.j.is_string()) c = a.j.get<std::string>().compare(b.j.get<std::string>());
      else if (a.j.is_number() && b.j.is_number()) c = a.j.get<double>() < b.j.get<double>() ? -1 : a.j.get<double>() > b.j.get<double>() ? 1 : 0;
      else fail("'" + op + "' between a " + a.j.type_name() + " and a " + b.j.type_name());
      return Val{json(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0)};
    }
    if (!a.j.is_number() || !b.j.is_number())
      fail("'" + op + "' between a " + std::string(a.undef ? "undefined" : a.j.type_name()) + " and a " +
           (b.undef ? "undefined" : b.j.type_name()));
    const bool ints = a.j.is_number_integer() && b.j.is_number_integer();
    if (ints && op != "/") {
      int64_t x = a.j.get<int64_t>(), y = b.j.get<int64_t>(), r = 0;
      if ((op == "//" || op == "%") && y == 0) fail("division by zero");
      bool over = op == "+" ? __builtin_add_overflow(x, y, &r) : op == "-" ? __builtin_sub_overflow(x, y, &r)
                 : op == "*" ? __builtin_mul_overflow(x, y, &r) : (y == -1 && x == INT64_MIN);
      if (over) fail("integer overflow in '" + op + "'");
      if (op == "+" || op == "-" || op == "*") return Val{json(r)};
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) m += y;  // Python's modulo: the divisor's sign
      if (op == "%") return Val{json(m)};
      return Val{json((x - m) / y)};
    }
    double x = a.j.get<double>(), y = b.j.get<double>();
    if ((op == "/" || op == "//" || op == "%") && y == 0) fail("division by zero");
    if (op == "+") return Val{json(x + y)};
    if (op == "-") return Val{json(x - y)};
    if (op == "*") return Val{json(x * y)};
    if (op == "/") return Val{json(x / y)};
    if (op == "//") return Val{json(std::floor(x / y))};
    if (op == "%") return Val{json(x - y * std::floor(x / y))};
    fail("unknown operator " + op);
  }

  std::vector<Val> args(const Expr &e, size_t from) {
    std::vector<Val> v;
    for (size_t k = from; k < e.args.size(); ++k) v.push_back(eval(*e.args[k]));
    return v;
  }
  Val kwarg(const Expr &e, const std::string &k, Val dflt) {
    for (auto &[name, x] : e.kwargs)
      if (name == k) return eval(*x);
    return dflt;
  }

  static std::string strip(const std::string &s, const std::string &chars, bool left, bool right) {
    size_t b = 0, en = s.size();
    auto is = [&](char c) { return chars.empty() ? isspace((unsigned char)c) != 0 : chars.find(c) != std::string::npos; };
    if (left) while (b < en && is(s[b])) ++b;
    if (right) while (en > b && is(s[en - 1])) --en;
    return s.substr(b, en - b);
  }
  static std::string replaceAll(std::string s, const std::string &a, const std::string &b) {
    if (a.empty()) return s;
    for (size_t at = 0; (at = s.find(a, at)) != std::string::npos; at += b.size()) s.replace(at, a.size(), b);
    return s;
  }
  static std::string title(std::string s, bool firstOnly) {
    bool start = true;
    for (char &c : s) {
      if (isalpha((unsigned char)c)) {
        c = start ? (char)toupper((unsigned char)c) : firstOnly ? (char)tolower((unsigned char)c) : (char)tolower((unsigned char)c);
        start = false;
      } else {
        start = !firstOnly && true;
      }
    }
    return s;
  }

  Val call(const Expr &e) {
    const Expr &f = *e.args[0];
    std::vector<Val> a = args(e, 1);
    if (f.kind == Expr::Name && !lookup(f.s)) {
      if (f.s == "raise_exception") fail("the template raised an exception: " + (a.empty() ? std::string() : str(a[0])));
      if (f.s == "strftime_now") {
        if (a.empty() || !a[0].j.is_string()) fail("strftime_now needs a format");
        time_t now = time(nullptr);
        struct tm tm;
        localtime_r(&now, &tm);
        char buf[256];
        size_t n = strftime(buf, sizeof buf, a[0].j.get<std::string>().c_str(), &tm);
        return Val{json(std::string(buf, n))};
      }
      if (f.s == "namespace" || f.s == "dict") {
        json ns = json::object();
        if (f.s == "namespace") ns["__namespace__"] = true;
        for (auto &[k, x] : e.kwargs) ns[k] = eval(*x).j;
        return Val{ns};
      }
      if (f.s == "range") {
        int64_t lo = 0, hi = 0, st = 1;
        if (a.size() == 1) hi = toInt(a[0]);
        else if (a.size() >= 2) lo = toInt(a[0]), hi = toInt(a[1]), st = a.size() > 2 ? toInt(a[2]) : 1;
        if (st == 0) fail("range() with a step of 0");
        json r = json::array();
        for (int64_t i = lo; st > 0 ? i < hi : i > hi;) {
          if (r.size() >= 1000000) fail("range() of more than a million numbers");
          r.push_back(i);
          if (__builtin_add_overflow(i, st, &i)) break;
        }
        return Val{r};
      }
      fail("the function '" + f.s + "' is not supported (kiln's Jinja subset)");
    }
    Val target = eval(f);
    if (!target.j.is_object() || !target.j.contains("__method__")) fail("a call of something that is not a function");
    std::string m = target.j["__method__"].get<std::string>();
    const json &self = target.j["__self__"];
    auto s = [&](size_t k) { return k < a.size() && a[k].j.is_string() ? a[k].j.get<std::string>() : std::string(); };
    if (self.is_string()) {
      const std::string &x = self.get_ref<const std::string &>();
      if (m == "strip" || m == "lstrip" || m == "rstrip") return Val{json(strip(x, s(0), m != "rstrip", m != "lstrip"))};
      if (m == "upper" || m == "lower") {
        std::string r = x;
        for (char &c : r) c = m == "upper" ? (char)toupper((unsigned char)c) : (char)tolower((unsigned char)c);
        return Val{json(r)};
      }
      if (m == "title") return Val{json(title(x, false))};
      if (m == "capitalize") return Val{json(title(x, true))};
      if (m == "startswith") return Val{json(x.rfind(s(0), 0) == 0)};
      if (m == "endswith") return Val{json(x.size() >= s(0).size() && x.compare(x.size() - s(0).size(), s(0).size(), s(0)) == 0)};
      if (m == "replace") return Val{json(replaceAll(x, s(0), s(1)))};
      if (m == "split") {
        json r = json::array();
        std::string sep = s(0);
        if (sep.empty()) {
          size_t i = 0;
          while (i < x.size()) {
            while (i < x.size() && isspace((unsigned char)x[i])) ++i;
            size_t b = i;
            while (i < x.size() && !isspace((unsigned char)x[i])) ++i;
            if (i > b) r.push_back(x.substr(b, i - b));
          }
        } else {
          size_t b = 0;
          for (size_t at; (at = x.find(sep, b)) != std::string::npos; b = at + sep.size()) r.push_back(x.substr(b, at - b));
          r.push_back(x.substr(b));
        }
        return Val{r};
      }
    }
    if (self.is_object()) {
      if (m == "items") {
        json r = json::array();
        for (auto it = self.begin(); it != self.end(); ++it) r.push_back({it.key(), it.value()});
        return Val{r};
      }
      if (m == "keys" || m == "values") {
        json r = json::array();
        for (auto it = self.begin(); it != self.end(); ++it) r.push_back(m == "keys" ? json(it.key()) : it.value());
        return Val{r};
      }
      if (m == "get") {
        auto it = a.empty() || !a[0].j.is_string() ? self.end() : self.find(a[0].j.get<std::string>());
        return it != self.end() ? Val{*it} : a.size() > 1 ? a[1] : Val{json()};
      }
    }
    fail("the method '" + m + "' of a " + std::string(self.type_name()) + " is not supported (kiln's Jinja subset)");
  }

  Val filter(const Expr &e) {
    Val v = eval(*e.args[0]);
    std::vector<Val> a = args(e, 1);
    const std::string &f = e.s;
    if (f == "trim") return Val{json(strip(str(v), "", true, true))};
    if (f == "length" || f == "count") {
      if (v.j.is_string()) return Val{json((int64_t)v.j.get_ref<const std::string &>().size())};
      if (v.j.is_array() || v.j.is_object()) return Val{json((int64_t)v.j.size())};
      fail("length of a " + std::string(v.undef ? "undefined value" : v.j.type_name()));
    }
    if (f == "tojson") {
      Val ind = kwarg(e, "indent", a.empty() ? Val{json()} : a[0]);
      std::string s;
      dumps(v.j, s, ind.j.is_number_integer() ? (int)ind.j.get<int64_t>() : -1, 0);
      return Val{json(s)};
    }
    if (f == "default" || f == "d") {
      bool boolean = a.size() > 1 && truthy(a[1]);
      if (v.undef || (boolean && !truthy(v))) return a.empty() ? Val{json("")} : a[0];
      return v;
    }
    if (f == "upper" || f == "lower") {
      std::string r = str(v);
      for (char &c : r) c = f == "upper" ? (char)toupper((unsigned char)c) : (char)tolower((unsigned char)c);
      return Val{json(r)};
    }
    if (f == "capitalize") return Val{json(title(str(v), true))};
    if (f == "title") return Val{json(title(str(v), false))};
    if (f == "string") return Val{json(str(v))};
    if (f == "safe" || f == "e" || f == "escape") return v;  // no autoescaping in chat templates
    if (f == "int") return Val{json(v.j.is_string() ? (int64_t)strtoll(v.j.get<std::string>().c_str(), nullptr, 10) : toInt(v))};
    if (f == "float") return Val{json(v.j.is_number() ? v.j.get<double>() : v.j.is_string() ? strtod(v.j.get<std::string>().c_str(), nullptr) : 0.0)};
    if (f == "replace") {
      if (a.size() < 2) fail("replace needs two arguments");
      return Val{json(replaceAll(str(v), str(a[0]), str(a[1])))};
    }
    if (f == "join") {
      std::string sep = a.empty() ? "" : str(a[0]), r;
      if (!v.j.is_array()) fail("join of a " + std::string(v.j.type_name()));
      for (size_t k = 0; k < v.j.size(); ++k) r += (k ? sep : "") + str(Val{v.j[k]});
      return Val{json(r)};
    }
    if (f == "first" || f == "last") {
      if (v.j.is_array()) return v.j.empty() ? Val::undefined() : Val{f == "first" ? v.j.front() : v.j.back()};
      if (v.j.is_string()) {
        const std::string &s = v.j.get_ref<const std::string &>();
        return s.empty() ? Val::undefined() : Val{json(std::string(1, f == "first" ? s.front() : s.back()))};
      }
      fail(f + " of a " + std::string(v.j.type_name()));
    }
    if (f == "reverse") {
      if (v.j.is_string()) {
        std::string s = v.j.get<std::string>();
        std::reverse(s.begin(), s.end());
        return Val{json(s)};
      }
      json r = v.j;
      if (r.is_array()) std::reverse(r.begin(), r.end());
      return Val{r};
    }
    if (f == "list") {
      if (v.j.is_array()) return v;
      json r = json::array();
      if (v.j.is_string()) for (char c : v.j.get<std::string>()) r.push_back(std::string(1, c));
      else if (v.j.is_object()) for (auto it = v.j.begin(); it != v.j.end(); ++it) r.push_back(it.key());
      return Val{r};
    }
    if (f == "items") {
      json r = json::array();
      if (v.j.is_object()) for (auto it = v.j.begin(); it != v.j.end(); ++it) r.push_back({it.key(), it.value()});
      return Val{r};
    }
    if (f == "map") {
      Val attr = kwarg(e, "attribute", Val::undefined());
      if (attr.undef || !v.j.is_array()) fail("map is supported as map(attribute=NAME) over a list");
      json r = json::array();
      for (const json &x : v.j) r.push_back(member(Val{x}, attr.j).j);
      return Val{r};
    }
    if (f == "selectattr" || f == "rejectattr") {
      if (!v.j.is_array() || a.empty()) fail(f + " needs a list and an attribute");
      json r = json::array();
      for (const json &x : v.j) {
        Val m = member(Val{x}, a[0].j);
        bool ok;
        if (a.size() == 1) ok = truthy(m);
        else {
          Expr t{Expr::Test, str(a[1])};
          auto lit = std::make_shared<Expr>(Expr{Expr::Lit});
          lit->lit = m;
          t.args = {lit};
          for (size_t k = 2; k < a.size(); ++k) {
            auto l = std::make_shared<Expr>(Expr{Expr::Lit});
            l->lit = a[k];
            t.args.push_back(l);
          }
          ok = test(t);
        }
        if (ok == (f == "selectattr")) r.push_back(x);
      }
      return Val{r};
    }
    fail("the filter '" + f + "' is not supported (kiln's Jinja subset)");
  }

  bool test(const Expr &e) {
    Val v = eval(*e.args[0]);
    std::vector<Val> a = args(e, 1);
    const std::string &t = e.s;
    if (t == "defined") return !v.undef;
    if (t == "undefined") return v.undef;
    if (t == "none") return !v.undef && v.j.is_null();
    if (t == "string") return v.j.is_string();
    if (t == "number") return v.j.is_number() && !v.j.is_boolean();
    if (t == "integer") return v.j.is_number_integer();
    if (t == "float") return v.j.is_number_float();
    if (t == "boolean") return v.j.is_boolean();
    if (t == "true") return v.j.is_boolean() && v.j.get<bool>();
    if (t == "false") return v.j.is_boolean() && !v.j.get<bool>();
    if (t == "mapping") return v.j.is_object();
    if (t == "iterable") return v.j.is_array() || v.j.is_object() || v.j.is_string();
    if (t == "sequence") return v.j.is_array() || v.j.is_string() || v.j.is_object();
    if (t == "equalto" || t == "eq" || t == "==") return !a.empty() && v.j == a[0].j;
    if (t == "ne" || t == "!=") return !a.empty() && v.j != a[0].j;
    if (t == "odd" || t == "even") return v.j.is_number_integer() && (v.j.get<int64_t>() % 2 != 0) == (t == "odd");
    if (t == "in") {
      if (a.empty()) return false;
      if (a[0].j.is_array()) return std::find(a[0].j.begin(), a[0].j.end(), v.j) != a[0].j.end();
      if (a[0].j.is_string() && v.j.is_string()) return a[0].j.get<std::string>().find(v.j.get<std::string>()) != std::string::npos;
      if (a[0].j.is_object() && v.j.is_string()) return a[0].j.contains(v.j.get<std::string>());
      return false;
    }
    fail("the test '" + t + "' is not supported (kiln's Jinja subset)");
  }

  std::vector<std::map<std::string, Val>> scopes_;
  int line_ = 0;
};

}  // namespace

kilnrt_status render_template(const std::string &source, const json &context, std::string &out) {
  out.clear();
  try {
    Body b = Parser(segments(source)).parse();
    Renderer(context).run(b, out);
  } catch (const TemplateError &e) {
    return user_error("chat template, line " + std::to_string(e.line) + ": " + e.msg);
  } catch (const LoopControl &) {
    return user_error("chat template: 'break' or 'continue' outside a loop");
  } catch (const json::exception &e) {
    return user_error(std::string("chat template: ") + e.what());
  } catch (const std::exception &e) {  // e.g. out of memory
    return user_error(std::string("chat template: ") + e.what());
  }
  return KILNRT_OK;
}

}  // namespace kilnrt::text
