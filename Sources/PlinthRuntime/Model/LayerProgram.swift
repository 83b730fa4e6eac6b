// A layer as its architecture writes it (ModelArchitecture.layer), recorded as data: the CPU
// records each layer before it runs it (to fuse neighbours), the CUDA step records each layer
// once and replays the program on the device.

/// One operation of a layer as its architecture asked for it (``LayerStep``).
enum LayerOp {
    case norm(StepBuffer, LayerTensor, into: StepBuffer)
    case headNorm(StepBuffer, LayerTensor)
    case project(StepBuffer, [(LayerTensor, StepBuffer)])
    case rope(StepBuffer, table: Int)
    case attend(window: Int?, scale: Float, softcap: Float?)
    case feedForward(StepBuffer, Activation, into: StepBuffer)
    case addToResidual(StepBuffer)

    func reads(_ b: StepBuffer) -> Bool {
        switch self {
        case .norm(let source, _, _): source == b
        case .headNorm(let x, _), .rope(let x, _), .addToResidual(let x): x == b
        case .project(let input, _), .feedForward(let input, _, _): input == b
        case .attend: b == .query || b == .key || b == .value
        }
    }

    func writes(_ b: StepBuffer) -> Bool {
        switch self {
        case .norm(_, _, let target), .feedForward(_, _, let target): target == b
        case .headNorm(let x, _), .rope(let x, _): x == b
        case .project(_, let products): products.contains { $0.1 == b }
        case .attend: b == .attention
        case .addToResidual: b == .residual
        }
    }
}

/// The operations of the layer being recorded, reused from layer to layer.
final class LayerProgram {
    var ops: [LayerOp] = []
}

/// A ``LayerStep`` whose operations append to a program (the CPU's step, which then runs it;
/// ``LayerRecorder``, which only keeps it).
protocol RecordingLayerStep: LayerStep {
    var program: LayerProgram { get }
}

extension RecordingLayerStep {
    func norm(_ source: StepBuffer, _ weight: LayerTensor, into target: StepBuffer) { program.ops.append(.norm(source, weight, into: target)) }
    func headNorm(_ b: StepBuffer, _ weight: LayerTensor) { program.ops.append(.headNorm(b, weight)) }
    func project(_ input: StepBuffer, _ products: [(LayerTensor, StepBuffer)]) { program.ops.append(.project(input, products)) }
    func rope(_ b: StepBuffer, table: Int) { program.ops.append(.rope(b, table: table)) }
    func attend(window: Int?, scale: Float, softcap: Float?) {
        program.ops.append(.attend(window: window, scale: scale, softcap: softcap))
    }
    func feedForward(_ input: StepBuffer, _ activation: Activation, into target: StepBuffer) {
        program.ops.append(.feedForward(input, activation, into: target))
    }
    func addToResidual(_ b: StepBuffer) { program.ops.append(.addToResidual(b)) }
}

/// A step that only records: layer `index`'s operations, as its architecture asks for them.
struct LayerRecorder: RecordingLayerStep {
    let program = LayerProgram()

    static func ops(of architecture: any ModelArchitecture, layer index: Int) -> [LayerOp] {
        let recorder = LayerRecorder()
        architecture.layer(index, recorder)
        return recorder.program.ops
    }
}
