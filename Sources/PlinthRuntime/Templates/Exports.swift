// Chat templates are Jinja: users of the runtime see the engine's values and errors
// (`JinjaValue`, `ChatTemplateError`) without importing it themselves.
@_exported import PlinthJinja
