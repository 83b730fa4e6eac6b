/// One metadata value of a GGUF file. Arrays may nest.
public enum GGUFValue: Sendable, Equatable {
    case uint8(UInt8), int8(Int8), uint16(UInt16), int16(Int16)
    case uint32(UInt32), int32(Int32), uint64(UInt64), int64(Int64)
    case float32(Float), float64(Double)
    case bool(Bool)
    case string(String)
    case array([GGUFValue])

    /// GGUF's name of the value's type, used in error messages.
    public var typeName: String {
        switch self {
        case .uint8: "uint8"
        case .int8: "int8"
        case .uint16: "uint16"
        case .int16: "int16"
        case .uint32: "uint32"
        case .int32: "int32"
        case .uint64: "uint64"
        case .int64: "int64"
        case .float32: "float32"
        case .float64: "float64"
        case .bool: "bool"
        case .string: "string"
        case .array: "array"
        }
    }

    public var isInteger: Bool {
        switch self {
        case .uint8, .int8, .uint16, .int16, .uint32, .int32, .uint64, .int64: true
        default: false
        }
    }

    /// The value as an integer, when it is one of the integer types and fits.
    public var intValue: Int? {
        switch self {
        case .uint8(let v): Int(v)
        case .int8(let v): Int(v)
        case .uint16(let v): Int(v)
        case .int16(let v): Int(v)
        case .uint32(let v): Int(v)
        case .int32(let v): Int(v)
        case .uint64(let v): Int(exactly: v)
        case .int64(let v): Int(v)
        default: nil
        }
    }

    /// The value as a float, for either float type and for integers.
    public var doubleValue: Double? {
        switch self {
        case .float32(let v): Double(v)
        case .float64(let v): v
        default: intValue.map(Double.init)
        }
    }

    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }
    public var arrayValue: [GGUFValue]? { if case .array(let a) = self { a } else { nil } }
}
