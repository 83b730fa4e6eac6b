// The schema compiler reads and writes `JSONValue`s: its users see them without importing the
// JSON target.
@_exported import PlinthJSON
