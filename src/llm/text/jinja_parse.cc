// Lexer and parser of the chat-template Jinja subset (jinja.h). The lexer applies Jinja's
// whitespace rules as transformers configures them (trim_blocks, lstrip_blocks, the trailing
// newline dropped); the parser follows Jinja's grammar and precedence.
#include <cctype>
#include <cstdlib>

#include "llm/text/jinja.h"
#include "llm/text/jinja_ast.h"
#include "llm/text/jinja_parse.h"
#include "llm/text/utf8.h"

namespace tunableop::llm::jinja {

namespace {

struct Token {
  enum class Kind { kText, kPrintBegin, kPrintEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEnd };
  Kind kind;
  std::string text;
  int line;
  Value value;  // numbers and strings
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::string rstrip_space(std::string s) {
  while (!s.empty() && is_space(s.back())) s.pop_back();
  return s;
}

class Lexer {
 public:
  Lexer(std::string src, const std::string& name) : src_(std::move(src)), name_(name) {}

  StatusOr<std::vector<Token>> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      const size_t at = next_opener(pos);
      std::string text = src_.substr(pos, (at == std::string::npos ? src_.size() : at) - pos);
      if (at == std::string::npos) {
        emit_text(text);
        break;
      }
      const char kind = src_[at + 1];  // '{', '%' or '#'
      const char sign = at + 2 < src_.size() && (src_[at + 2] == '-' || src_[at + 2] == '+') ? src_[at + 2] : 0;
      const int text_lines = count_lines(text);
      if (sign == '-') {
        text = rstrip_space(text);
      } else if (sign != '+' && kind != '{') {  // lstrip_blocks
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if (l_pos > 0 || line_starting) {
          bool blank = l_pos < text.size();
          for (size_t i = l_pos; i < text.size(); ++i) blank = blank && is_space(text[i]);
          if (blank) text.resize(l_pos);
        }
      }
      emit_text(text);
      line_ += text_lines;
      pos = at + 2 + (sign ? 1 : 0);
      StatusOr<size_t> end = kind == '#' ? comment(pos) : kind == '{' ? tag(pos, false) : tag(pos, true);
      if (!end.is_ok()) return end.status();
      line_starting = *end > 0 && src_[*end - 1] == '\n';
      pos = *end;
    }
    tokens_.push_back({Token::Kind::kEnd, "", line_, {}});
    return std::move(tokens_);
  }

 private:
  size_t next_opener(size_t pos) const {
    for (size_t i = src_.find('{', pos); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }
  static int count_lines(const std::string& s) {
    int n = 0;
    for (char c : s) n += c == '\n';
    return n;
  }
  void emit_text(const std::string& text) {
    if (!text.empty()) tokens_.push_back({Token::Kind::kText, text, line_, {}});
  }
  Status error(const std::string& what) const {
    return Status::parse_error(name_ + ":" + std::to_string(line_) + ": " + what);
  }

  // After a block or comment end: trim_blocks drops one newline; "-" drops all white space.
  size_t after_end(size_t pos, char sign) {
    if (sign == '-') {
      while (pos < src_.size() && is_space(src_[pos])) line_ += src_[pos++] == '\n';
    } else if (sign != '+' && pos < src_.size() && src_[pos] == '\n') {
      ++pos, ++line_;
    }
    return pos;
  }

  StatusOr<size_t> comment(size_t pos) {
    const size_t close = src_.find("#}", pos);
    if (close == std::string::npos) return error("a comment ({# ... #}) is never closed");
    line_ += count_lines(src_.substr(pos, close - pos));
    const char sign = close > pos && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : 0;
    return after_end(close + 2, sign == '+' ? '+' : sign);
  }

  // {% raw %} ... {% endraw %}: the text between, as it is.
  StatusOr<size_t> raw(size_t pos) {
    for (size_t at = src_.find("{%", pos); at != std::string::npos; at = src_.find("{%", at + 2)) {
      size_t i = at + 2;
      if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
      while (i < src_.size() && is_space(src_[i])) ++i;
      if (src_.compare(i, 6, "endraw") != 0) continue;
      i += 6;
      while (i < src_.size() && is_space(src_[i])) ++i;
      char sign = 0;
      if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) sign = src_[i++];
      if (src_.compare(i, 2, "%}") != 0) continue;
      std::string text = src_.substr(pos, at - pos);
      if (src_[at + 2] == '-') text = rstrip_space(text);
      tokens_.push_back({Token::Kind::kText, text, line_, {}});
      line_ += count_lines(src_.substr(pos, i - pos));
      return after_end(i + 2, sign);
    }
    return error("{% raw %} is never closed by {% endraw %}");
  }

  StatusOr<size_t> tag(size_t pos, bool block) {
    // {% raw %} is the lexer's business.
    if (block) {
      size_t i = pos;
      while (i < src_.size() && is_space(src_[i])) ++i;
      if (src_.compare(i, 3, "raw") == 0 &&
          (i + 3 >= src_.size() || !std::isalnum(static_cast<unsigned char>(src_[i + 3])))) {
        i += 3;
        while (i < src_.size() && is_space(src_[i])) ++i;
        char sign = 0;
        if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) sign = src_[i++];
        if (src_.compare(i, 2, "%}") == 0) return raw(after_end(i + 2, sign == '-' ? '-' : '+'));
      }
    }
    tokens_.push_back({block ? Token::Kind::kBlockBegin : Token::Kind::kPrintBegin, "", line_, {}});
    int depth = 0;  // brackets open: "}}" inside a dict literal does not end the tag
    for (;;) {
      while (pos < src_.size() && is_space(src_[pos])) line_ += src_[pos++] == '\n';
      if (pos >= src_.size()) return error(block ? "a {% tag is never closed" : "a {{ tag is never closed");
      const char c = src_[pos];
      if (depth == 0) {
        const char* close = block ? "%}" : "}}";
        char sign = 0;
        size_t at = pos;
        if ((c == '-' || (c == '+' && block)) && src_.compare(pos + 1, 2, close) == 0) sign = c, at = pos + 1;
        if (src_.compare(at, 2, close) == 0) {
          tokens_.push_back({block ? Token::Kind::kBlockEnd : Token::Kind::kPrintEnd, "", line_, {}});
          return block ? after_end(at + 2, sign) : (sign == '-' ? after_end(at + 2, '-') : at + 2);
        }
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = pos;
        while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        tokens_.push_back({Token::Kind::kName, src_.substr(pos, e - pos), line_, {}});
        pos = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        auto n = number(pos);
        if (!n.is_ok()) return n.status();
        pos = *n;
      } else if (c == '\'' || c == '"') {
        auto s = string(pos);
        if (!s.is_ok()) return s.status();
        pos = *s;
      } else {
        static const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                     ">",  "=",  ".",  ",",  ":",  "|",  "(", ")", "[", "]", "{", "}"};
        const char* op = nullptr;
        for (const char* o : kOps) {
          if (src_.compare(pos, std::char_traits<char>::length(o), o) == 0) {
            op = o;
            break;
          }
        }
        if (!op) return error("unexpected character '" + utf8::excerpt(src_.substr(pos, 4), 1) + "' in a tag");
        if (op[0] == '(' || op[0] == '[' || op[0] == '{') ++depth;
        if ((op[0] == ')' || op[0] == ']' || op[0] == '}') && --depth < 0)
          return error(std::string("unbalanced '") + op + "'");
        tokens_.push_back({Token::Kind::kOp, op, line_, {}});
        pos += std::char_traits<char>::length(op);
      }
    }
  }

  StatusOr<size_t> number(size_t pos) {
    size_t e = pos;
    bool is_float = false;
    auto digits = [&] {
      while (e < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
    };
    digits();
    if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      is_float = true, ++e;
      digits();
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t k = e + 1;
      if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
      if (k < src_.size() && std::isdigit(static_cast<unsigned char>(src_[k]))) {
        is_float = true, e = k;
        digits();
      }
    }
    std::string text;
    for (size_t i = pos; i < e; ++i) {
      if (src_[i] != '_') text += src_[i];
    }
    Token t{is_float ? Token::Kind::kFloat : Token::Kind::kInt, text, line_, {}};
    errno = 0;
    if (is_float) {
      t.value = Value(std::strtod(text.c_str(), nullptr));
    } else {
      const long long v = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) return error("the integer " + utf8::excerpt(text, 30) + " is too large");
      t.value = Value(int64_t(v));
    }
    tokens_.push_back(std::move(t));
    return e;
  }

  // A Python string literal: the escapes Python knows (\n \t \r \\ \' \" \xNN \uNNNN \UNNNNNNNN).
  StatusOr<size_t> string(size_t pos) {
    const char q = src_[pos];
    std::string out;
    size_t i = pos + 1;
    const int start_line = line_;
    for (; i < src_.size() && src_[i] != q; ++i) {
      char c = src_[i];
      if (c == '\n') ++line_;
      if (c != '\\' || i + 1 >= src_.size()) {
        out += c;
        continue;
      }
      const char d = src_[++i];
      auto hex = [&](int n) -> StatusOr<uint32_t> {
        if (i + size_t(n) >= src_.size()) return error("a \\x/\\u escape runs past the string");
        uint32_t v = 0;
        for (int k = 1; k <= n; ++k) {
          const char h = src_[i + size_t(k)];
          if (!std::isxdigit(static_cast<unsigned char>(h))) return error("a bad \\x/\\u escape in a string");
          v = v * 16 + uint32_t(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
        }
        i += size_t(n);
        return v;
      };
      switch (d) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '0': out += '\0'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\n': ++line_; break;  // a continued line
        case 'x':
        case 'u':
        case 'U': {
          auto v = hex(d == 'x' ? 2 : d == 'u' ? 4 : 8);
          if (!v.is_ok()) return v.status();
          if (*v > 0x10FFFF || (*v >= 0xD800 && *v <= 0xDFFF))
            return error("a \\u escape outside Unicode's scalar values");
          utf8::append(out, *v);
          break;
        }
        default:  // Python keeps an unknown escape as it is
          out += '\\';
          out += d;
      }
    }
    if (i >= src_.size()) {
      line_ = start_line;
      return error("a string is never closed");
    }
    tokens_.push_back({Token::Kind::kString, "", start_line, Value(out)});
    return i + 1;
  }

  std::string src_;
  const std::string& name_;
  std::vector<Token> tokens_;
  int line_ = 1;
};

// Jinja's operator precedence, lowest first: "if" expressions, or, and, not, comparisons (and
// in), + -, ~, * / // %, **, unary - +, then postfix (. [] ()) and filters/tests.
class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& name) : t_(std::move(tokens)), name_(name) {}

  StatusOr<Body> run() {
    std::string ended_by;
    auto body = parse_body({}, &ended_by);
    if (!body.is_ok()) return body.status();
    return std::move(*body);
  }

 private:
  static constexpr int kMaxDepth = 64;  // real templates nest a handful of levels

  const Token& peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  Token take() { return t_[std::min(i_++, t_.size() - 1)]; }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).kind == Token::Kind::kOp && peek(ahead).text == op;
  }
  bool is_name(const char* n, size_t ahead = 0) const {
    return peek(ahead).kind == Token::Kind::kName && peek(ahead).text == n;
  }
  Status error(const std::string& what, int line = -1) const {
    return Status::parse_error(name_ + ":" + std::to_string(line < 0 ? peek().line : line) + ": " + what);
  }
  std::string describe(const Token& t) const {
    switch (t.kind) {
      case Token::Kind::kEnd: return "the end of the template";
      case Token::Kind::kBlockEnd: return "'%}'";
      case Token::Kind::kPrintEnd: return "'}}'";
      case Token::Kind::kString: return "a string";
      default: return "'" + utf8::excerpt(t.text, 30) + "'";
    }
  }
  Status expect_op(const char* op) {
    if (!is_op(op)) return error(std::string("expected '") + op + "', found " + describe(peek()));
    ++i_;
    return Status::ok();
  }
  Status expect_block_end(const std::string& tag) {
    if (peek().kind != Token::Kind::kBlockEnd) {
      return error("expected '%}' to end {% " + tag + " %}, found " + describe(peek()));
    }
    ++i_;
    return Status::ok();
  }
  StatusOr<std::string> expect_name(const char* what) {
    if (peek().kind != Token::Kind::kName)
      return error(std::string("expected ") + what + ", found " + describe(peek()));
    return take().text;
  }
  ExprPtr node(Expr::Kind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  // Statements up to one of `ends` ({% endif %}, {% else %}, ...), whose name goes to *ended_by;
  // the closing tag's name is consumed, its "%}" is not.
  StatusOr<Body> parse_body(const std::vector<std::string>& ends, std::string* ended_by) {
    if (++depth_ > kMaxDepth) return error("blocks nested deeper than " + std::to_string(kMaxDepth));
    Body body;
    for (;;) {
      const Token& t = peek();
      if (t.kind == Token::Kind::kEnd) {
        if (ends.empty()) break;
        return error("{% " + ends.back() + " %} is missing (the template ends inside a block)");
      }
      if (t.kind == Token::Kind::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->line = t.line;
        s->text = t.text;
        body.push_back(std::move(s));
        ++i_;
        continue;
      }
      if (t.kind == Token::Kind::kPrintBegin) {
        ++i_;
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kPrint;
        s->line = t.line;
        auto e = expression();
        if (!e.is_ok()) return e.status();
        s->expr = std::move(*e);
        if (peek().kind != Token::Kind::kPrintEnd) return error("expected '}}', found " + describe(peek()));
        ++i_;
        body.push_back(std::move(s));
        continue;
      }
      if (t.kind != Token::Kind::kBlockBegin) return error("unexpected " + describe(t));
      const int line = t.line;
      ++i_;
      auto tag = expect_name("a statement name after '{%'");
      if (!tag.is_ok()) return tag.status();
      for (const std::string& end : ends) {
        if (*tag == end) {
          *ended_by = *tag;
          --depth_;
          return body;
        }
      }
      auto s = statement(*tag, line);
      if (!s.is_ok()) return s.status();
      body.push_back(std::move(*s));
    }
    --depth_;
    return body;
  }

  StatusOr<std::unique_ptr<Stmt>> statement(const std::string& tag, int line) {
    auto s = std::make_unique<Stmt>();
    s->line = line;
    if (tag == "if") {
      s->kind = Stmt::Kind::kIf;
      std::string ended = "elif";
      while (ended == "elif") {
        auto cond = expression();
        if (!cond.is_ok()) return cond.status();
        TUNABLEOP_RETURN_IF_ERROR(expect_block_end(ended == "elif" && s->conditions.empty() ? "if" : "elif"));
        auto body = parse_body({"elif", "else", "endif"}, &ended);
        if (!body.is_ok()) return body.status();
        s->conditions.push_back(std::move(*cond));
        s->bodies.push_back(std::move(*body));
      }
      if (ended == "else") {
        TUNABLEOP_RETURN_IF_ERROR(expect_block_end("else"));
        auto body = parse_body({"endif"}, &ended);
        if (!body.is_ok()) return body.status();
        s->else_body = std::move(*body);
      }
      TUNABLEOP_RETURN_IF_ERROR(expect_block_end("endif"));
      return s;
    }
    if (tag == "for") {
      s->kind = Stmt::Kind::kFor;
      do {
        auto target = expect_name("a loop variable");
        if (!target.is_ok()) return target.status();
        s->targets.push_back(*target);
      } while (is_op(",") && (++i_, true));
      if (!is_name("in")) return error("expected 'in' in {% for %}, found " + describe(peek()));
      ++i_;
      auto iter = condition_free_expression();  // "if" here filters the loop
      if (!iter.is_ok()) return iter.status();
      s->expr = std::move(*iter);
      if (is_name("if")) {
        ++i_;
        auto filter = expression();
        if (!filter.is_ok()) return filter.status();
        s->filter = std::move(*filter);
      }
      if (is_name("recursive")) return error("unsupported construct: a recursive {% for %}");
      TUNABLEOP_RETURN_IF_ERROR(expect_block_end("for"));
      std::string ended;
      auto body = parse_body({"else", "endfor"}, &ended);
      if (!body.is_ok()) return body.status();
      s->bodies.push_back(std::move(*body));
      if (ended == "else") {
        TUNABLEOP_RETURN_IF_ERROR(expect_block_end("else"));
        auto else_body = parse_body({"endfor"}, &ended);
        if (!else_body.is_ok()) return else_body.status();
        s->else_body = std::move(*else_body);
      }
      TUNABLEOP_RETURN_IF_ERROR(expect_block_end("endfor"));
      return s;
    }
    if (tag == "set") {
      auto target = expect_name("a variable name after {% set");
      if (!target.is_ok()) return target.status();
      s->targets.push_back(*target);
      if (is_op(".")) {
        ++i_;
        auto attr = expect_name("an attribute name");
        if (!attr.is_ok()) return attr.status();
        s->attr = *attr;
      }
      while (is_op(",") && s->attr.empty()) {
        ++i_;
        auto more = expect_name("a variable name");
        if (!more.is_ok()) return more.status();
        s->targets.push_back(*more);
      }
      if (peek().kind == Token::Kind::kBlockEnd && s->targets.size() == 1 && s->attr.empty()) {
        ++i_;
        s->kind = Stmt::Kind::kSetBlock;
        std::string ended;
        auto body = parse_body({"endset"}, &ended);
        if (!body.is_ok()) return body.status();
        s->bodies.push_back(std::move(*body));
        TUNABLEOP_RETURN_IF_ERROR(expect_block_end("endset"));
        return s;
      }
      s->kind = Stmt::Kind::kSet;
      TUNABLEOP_RETURN_IF_ERROR(expect_op("="));
      auto value = tuple_expression();
      if (!value.is_ok()) return value.status();
      s->expr = std::move(*value);
      TUNABLEOP_RETURN_IF_ERROR(expect_block_end("set"));
      return s;
    }
    if (tag == "break" || tag == "continue") {
      s->kind = tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      TUNABLEOP_RETURN_IF_ERROR(expect_block_end(tag));
      return s;
    }
    if (tag == "generation") {  // transformers' assistant-mask marker: no output of its own
      s->kind = Stmt::Kind::kBlock;
      TUNABLEOP_RETURN_IF_ERROR(expect_block_end(tag));
      std::string ended;
      auto body = parse_body({"endgeneration"}, &ended);
      if (!body.is_ok()) return body.status();
      s->bodies.push_back(std::move(*body));
      TUNABLEOP_RETURN_IF_ERROR(expect_block_end("endgeneration"));
      return s;
    }
    static const char* kKnown[] = {"macro",   "call",  "filter", "include",    "import", "from",
                                   "extends", "block", "with",   "autoescape", "do"};
    for (const char* k : kKnown) {
      if (tag == k) return error("unsupported construct: {% " + tag + " %}", line);
    }
    return error("unknown statement {% " + utf8::excerpt(tag, 30) + " %}", line);
  }

  // Expressions. Each level takes the next higher one's result.
  StatusOr<ExprPtr> expression() { return conditional(true); }
  StatusOr<ExprPtr> condition_free_expression() { return conditional(false); }

  // "a, b" in {% set a, b = ... %} or {% set x = 1, 2 %}: a tuple without parentheses.
  StatusOr<ExprPtr> tuple_expression() {
    auto first = expression();
    if (!first.is_ok() || !is_op(",")) return first;
    auto list = node(Expr::Kind::kList, (*first)->line);
    list->name = "tuple";
    list->args.push_back(std::move(*first));
    while (is_op(",")) {
      ++i_;
      auto more = expression();
      if (!more.is_ok()) return more.status();
      list->args.push_back(std::move(*more));
    }
    return list;
  }

  StatusOr<ExprPtr> conditional(bool with_if) {
    if (++depth_ > kMaxDepth) return error("an expression nested deeper than " + std::to_string(kMaxDepth));
    auto e = or_expr();
    while (e.is_ok() && with_if && is_name("if")) {
      const int line = peek().line;
      ++i_;
      auto cond = or_expr();
      if (!cond.is_ok()) return cond.status();
      auto c = node(Expr::Kind::kCondition, line);
      c->args.push_back(std::move(*e));
      c->args.push_back(std::move(*cond));
      if (is_name("else")) {
        ++i_;
        auto other = conditional(true);
        if (!other.is_ok()) return other.status();
        c->args.push_back(std::move(*other));
      } else {
        c->args.push_back(nullptr);
      }
      e = std::move(c);
    }
    --depth_;
    return e;
  }

  // a or b, a and b: left-associative chains of one keyword over the next level.
  StatusOr<ExprPtr> or_expr() { return chain("or", Expr::Kind::kOr, &Parser::and_expr); }
  StatusOr<ExprPtr> and_expr() { return chain("and", Expr::Kind::kAnd, &Parser::not_expr); }
  StatusOr<ExprPtr> chain(const char* word, Expr::Kind kind, StatusOr<ExprPtr> (Parser::*next)()) {
    auto e = (this->*next)();
    while (e.is_ok() && is_name(word)) {
      const int line = take().line;
      auto rhs = (this->*next)();
      if (!rhs.is_ok()) return rhs.status();
      auto n = node(kind, line);
      n->args.push_back(std::move(*e));
      n->args.push_back(std::move(*rhs));
      e = std::move(n);
    }
    return e;
  }

  StatusOr<ExprPtr> not_expr() {
    if (is_name("not")) {
      if (++depth_ > kMaxDepth) return error("an expression nested deeper than " + std::to_string(kMaxDepth));
      const int line = take().line;
      auto x = not_expr();
      --depth_;
      if (!x.is_ok()) return x.status();
      auto n = node(Expr::Kind::kNot, line);
      n->args.push_back(std::move(*x));
      return n;
    }
    return compare();
  }

  StatusOr<ExprPtr> compare() {
    auto e = binary_level(0);
    for (;;) {
      if (!e.is_ok()) return e;
      std::string op;
      const Token& t = peek();
      if (t.kind == Token::Kind::kOp &&
          (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" || t.text == ">" || t.text == ">=")) {
        op = t.text;
        ++i_;
      } else if (is_name("in")) {
        op = "in";
        ++i_;
      } else if (is_name("not") && is_name("in", 1)) {
        op = "not in";
        i_ += 2;
      } else {
        return e;
      }
      auto rhs = binary_level(0);
      if (!rhs.is_ok()) return rhs.status();
      auto n = node(Expr::Kind::kBinary, t.line);
      n->name = op;
      n->args.push_back(std::move(*e));
      n->args.push_back(std::move(*rhs));
      e = std::move(n);
    }
  }

  // Levels: 0 "+ -", 1 "~", 2 "* / // %", 3 "**".
  StatusOr<ExprPtr> binary_level(int level) {
    static const std::vector<std::vector<std::string>> kLevels = {{"+", "-"}, {"~"}, {"*", "/", "//", "%"}, {"**"}};
    if (level == 4) return unary(true);
    auto e = binary_level(level + 1);
    for (;;) {
      if (!e.is_ok()) return e;
      const Token& t = peek();
      bool match = false;
      if (t.kind == Token::Kind::kOp) {
        for (const auto& op : kLevels[size_t(level)]) match = match || t.text == op;
      }
      if (!match) return e;
      ++i_;
      auto rhs = binary_level(level + 1);
      if (!rhs.is_ok()) return rhs.status();
      auto n = node(Expr::Kind::kBinary, t.line);
      n->name = t.text;
      n->args.push_back(std::move(*e));
      n->args.push_back(std::move(*rhs));
      e = std::move(n);
    }
  }

  StatusOr<ExprPtr> unary(bool with_filter) {
    if (is_op("-") || is_op("+")) {
      if (++depth_ > kMaxDepth) return error("an expression nested deeper than " + std::to_string(kMaxDepth));
      const Token t = take();
      auto x = unary(false);
      --depth_;
      if (!x.is_ok()) return x.status();
      auto n = node(t.text == "-" ? Expr::Kind::kNeg : Expr::Kind::kPos, t.line);
      n->args.push_back(std::move(*x));
      return with_filter ? filters_and_tests(std::move(n)) : StatusOr<ExprPtr>(std::move(n));
    }
    auto p = primary();
    if (!p.is_ok()) return p;
    auto e = postfix(std::move(*p));
    if (!e.is_ok() || !with_filter) return e;
    return filters_and_tests(std::move(*e));
  }

  StatusOr<ExprPtr> primary() {
    const Token t = peek();
    switch (t.kind) {
      case Token::Kind::kString: {
        std::string s;
        while (peek().kind == Token::Kind::kString) s += take().value.as_string();  // 'a' 'b' is 'ab'
        auto n = node(Expr::Kind::kLiteral, t.line);
        n->value = Value(s);
        return n;
      }
      case Token::Kind::kInt:
      case Token::Kind::kFloat: {
        ++i_;
        auto n = node(Expr::Kind::kLiteral, t.line);
        n->value = t.value;
        return n;
      }
      case Token::Kind::kName: {
        ++i_;
        auto n = node(Expr::Kind::kLiteral, t.line);
        if (t.text == "true" || t.text == "True") {
          n->value = Value(true);
        } else if (t.text == "false" || t.text == "False") {
          n->value = Value(false);
        } else if (t.text == "none" || t.text == "None") {
          n->value = Value::none();
        } else {
          n->kind = Expr::Kind::kName;
          n->name = t.text;
        }
        return n;
      }
      case Token::Kind::kOp:
        if (t.text == "(") {
          ++i_;
          if (is_op(")")) {  // ()
            ++i_;
            auto empty = node(Expr::Kind::kList, t.line);
            empty->name = "tuple";
            return empty;
          }
          auto e = expression();
          if (!e.is_ok()) return e;
          if (is_op(",")) {  // a tuple
            auto list = node(Expr::Kind::kList, t.line);
            list->name = "tuple";
            list->args.push_back(std::move(*e));
            while (is_op(",")) {
              ++i_;
              if (is_op(")")) break;
              auto more = expression();
              if (!more.is_ok()) return more.status();
              list->args.push_back(std::move(*more));
            }
            e = std::move(list);
          }
          TUNABLEOP_RETURN_IF_ERROR(expect_op(")"));
          return e;
        }
        if (t.text == "[") {
          ++i_;
          auto list = node(Expr::Kind::kList, t.line);
          while (!is_op("]")) {
            auto item = expression();
            if (!item.is_ok()) return item.status();
            list->args.push_back(std::move(*item));
            if (!is_op(",")) break;
            ++i_;
          }
          TUNABLEOP_RETURN_IF_ERROR(expect_op("]"));
          return list;
        }
        if (t.text == "{") {
          ++i_;
          auto dict = node(Expr::Kind::kDict, t.line);
          while (!is_op("}")) {
            auto key = expression();
            if (!key.is_ok()) return key.status();
            TUNABLEOP_RETURN_IF_ERROR(expect_op(":"));
            auto value = expression();
            if (!value.is_ok()) return value.status();
            dict->args.push_back(std::move(*key));
            dict->args.push_back(std::move(*value));
            if (!is_op(",")) break;
            ++i_;
          }
          TUNABLEOP_RETURN_IF_ERROR(expect_op("}"));
          return dict;
        }
        break;
      default: break;
    }
    return error("expected an expression, found " + describe(t));
  }

  // Call arguments after '(': positional, then name=value.
  Status call_args(Expr& call) {
    while (!is_op(")")) {
      if (peek().kind == Token::Kind::kName && is_op("=", 1)) {
        std::string key = take().text;
        ++i_;
        auto value = expression();
        if (!value.is_ok()) return value.status();
        call.kwargs.emplace_back(std::move(key), std::move(*value));
      } else {
        if (!call.kwargs.empty()) return error("a positional argument after a keyword argument");
        auto value = expression();
        if (!value.is_ok()) return value.status();
        call.args.push_back(std::move(*value));
      }
      if (!is_op(",")) break;
      ++i_;
    }
    return expect_op(")");
  }

  StatusOr<ExprPtr> postfix(ExprPtr e) {
    for (;;) {
      const Token t = peek();
      if (is_op(".")) {
        ++i_;
        if (peek().kind == Token::Kind::kInt) {  // x.0 is x[0]
          auto n = node(Expr::Kind::kIndex, t.line);
          auto k = node(Expr::Kind::kLiteral, t.line);
          k->value = take().value;
          n->args.push_back(std::move(e));
          n->args.push_back(std::move(k));
          e = std::move(n);
          continue;
        }
        auto attr = expect_name("an attribute name after '.'");
        if (!attr.is_ok()) return attr.status();
        auto n = node(Expr::Kind::kAttr, t.line);
        n->name = *attr;
        n->args.push_back(std::move(e));
        e = std::move(n);
      } else if (is_op("[")) {
        ++i_;
        ExprPtr parts[3];
        int colons = 0;
        for (;;) {
          if (is_op(":")) {
            if (++colons > 2) return error("a slice has at most two ':'");
            ++i_;
            continue;
          }
          if (is_op("]")) break;
          if (parts[colons]) return error("expected ']' or ':' in a subscript, found " + describe(peek()));
          auto x = expression();
          if (!x.is_ok()) return x.status();
          parts[colons] = std::move(*x);
        }
        ++i_;
        if (colons == 0) {
          if (!parts[0]) return error("an empty subscript []");
          auto n = node(Expr::Kind::kIndex, t.line);
          n->args.push_back(std::move(e));
          n->args.push_back(std::move(parts[0]));
          e = std::move(n);
        } else {
          auto n = node(Expr::Kind::kSlice, t.line);
          n->args.push_back(std::move(e));
          for (auto& p : parts) n->args.push_back(std::move(p));
          e = std::move(n);
        }
      } else if (is_op("(")) {
        ++i_;
        auto n = node(Expr::Kind::kCall, t.line);
        n->args.push_back(std::move(e));
        TUNABLEOP_RETURN_IF_ERROR(call_args(*n));
        e = std::move(n);
      } else {
        return e;
      }
    }
  }

  // x | f(args) | g, x is [not] test(args), and calls on the result.
  StatusOr<ExprPtr> filters_and_tests(ExprPtr e) {
    for (;;) {
      const Token t = peek();
      if (is_op("|")) {
        ++i_;
        auto name = expect_name("a filter name after '|'");
        if (!name.is_ok()) return name.status();
        auto n = node(Expr::Kind::kFilter, t.line);
        n->name = *name;
        n->args.push_back(std::move(e));
        if (is_op("(")) {
          ++i_;
          TUNABLEOP_RETURN_IF_ERROR(call_args(*n));
        }
        e = std::move(n);
      } else if (is_name("is")) {
        ++i_;
        auto n = node(Expr::Kind::kTest, t.line);
        if (is_name("not")) {
          ++i_;
          n->negated = true;
        }
        // "is none" / "is true": the literal words are test names here.
        if (peek().kind != Token::Kind::kName)
          return error("expected a test name after 'is', found " + describe(peek()));
        n->name = take().text;
        n->args.push_back(std::move(e));
        if (is_op("(")) {
          ++i_;
          TUNABLEOP_RETURN_IF_ERROR(call_args(*n));
        } else if (peek().kind == Token::Kind::kString || peek().kind == Token::Kind::kInt ||
                   peek().kind == Token::Kind::kFloat ||
                   (peek().kind == Token::Kind::kName && !is_name("else") && !is_name("or") && !is_name("and") &&
                    !is_name("if") && !is_name("not") && !is_name("in") && !is_name("is"))) {
          // One argument without parentheses: "x is divisibleby 3", "x is sameas none".
          auto arg = primary();
          if (!arg.is_ok()) return arg.status();
          auto full = postfix(std::move(*arg));
          if (!full.is_ok()) return full.status();
          n->args.push_back(std::move(*full));
        }
        e = std::move(n);
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  const std::string& name_;
  int depth_ = 0;
};

}  // namespace

StatusOr<std::shared_ptr<const Body>> parse_template(std::string_view source, const std::string& name) {
  // Jinja reads \r\n and \r as \n, and drops one trailing newline.
  std::string src;
  src.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      src += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      src += source[i];
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();
  auto tokens = Lexer(std::move(src), name).run();
  if (!tokens.is_ok()) return tokens.status();
  auto body = Parser(std::move(*tokens), name).run();
  if (!body.is_ok()) return body.status();
  return std::shared_ptr<const Body>(std::make_shared<Body>(std::move(*body)));
}

}  // namespace tunableop::llm::jinja
