// Renders a parsed chat template. Scoping follows jinja2: `for` bodies, macros and `with` get a
// scope of their own (a `set` inside a loop does not leak out; namespace() is the way to carry
// state out of a loop), `if` does not.
#pragma once
#include <string>

#include "template/jinja_ast.h"
#include "template/jinja_value.h"

namespace lite_llama::jinja {

// Throws lite_llama::Error "chat template line L: msg" for runtime errors (type errors,
// raise_exception(msg), calling something undefined ...).
std::string render(const Body& body, const Dict& context);

}  // namespace lite_llama::jinja
