import Testing

/// The error `body` throws as `E`, or nil (recording an issue) when it throws nothing or another type.
func caughtError<E: Error>(_ errorType: E.Type, _ body: () throws -> Void,
                           sourceLocation: SourceLocation = #_sourceLocation) -> E? {
    do {
        try body()
        Issue.record("expected \(E.self) but nothing was thrown", sourceLocation: sourceLocation)
    } catch let e as E {
        return e
    } catch {
        Issue.record("expected \(E.self) but got \(type(of: error)): \(error)", sourceLocation: sourceLocation)
    }
    return nil
}
