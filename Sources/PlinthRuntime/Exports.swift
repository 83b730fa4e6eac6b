// Users of the runtime see these without importing them: chat templates are Jinja (its values
// and errors, `JinjaValue`, `ChatTemplateError`), and the catalog's entries are the models that
// `ModelStore` resolves (`ModelCatalog`, `ModelEntry`).
@_exported import PlinthJinja
@_exported import PlinthModels
