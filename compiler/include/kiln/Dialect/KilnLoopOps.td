// KilnLoopOps.td - the Universal Transformer's recurrence: kiln.recurrent (a shared step with
// ACT halting), the host loop kiln-lower-act expands it into, and the ACT bookkeeping kernels.
#ifndef KILN_LOOP_OPS
#define KILN_LOOP_OPS

def Kiln_RecurrentOp : Kiln_Op<"recurrent", [], "None", ["inferSeqLengths"]> {
  let summary = "one shared step applied repeatedly, with adaptive computation time (ACT) halting";
  let description = [{
    The Universal Transformer's recurrence. `init` [L, d] is the first state; the body maps the
    step's input x [L, d] to the next state (`kiln.yield`). Each step t (from 0):
      x = state + sinusoid(position) + sinusoid(t)          (the position-and-timestep signal)
      p = sigmoid(x·halt_weight + halt_bias)                 (per position)
    A running position (halting sum h < 1) halts when h + p > threshold or t = max_steps - 1;
    its last weight is then the remainder 1 - h, otherwise p. The output is the sum of each
    step's state weighted so; a halted position stops updating (its state becomes its output).
    The loop stops when every position halted. Results: hidden [L, d], ponder [L] (steps taken
    plus the remainder), steps [L] (i32) and iterations [1] (i32: the steps the loop ran, counted
    by the steps themselves). kiln-lower-act expands it into a kiln.loop.

    ```mlir
    %h, %p, %n, %it = kiln.recurrent %x, %w, %b {max_steps = 8 : i64, threshold = 0.99 : f32} : (tensor<?x64xf32>, tensor<64xf32>, tensor<1xf32>) -> (tensor<?x64xf32>, tensor<?xf32>, tensor<?xi32>, tensor<1xi32>) {
    ^bb0(%s: tensor<?x64xf32>):
      %y = kiln.relu %s : (tensor<?x64xf32>) -> tensor<?x64xf32>
      kiln.yield %y : tensor<?x64xf32>
    }
    ```
  }];
  let arguments = (ins AnyRankedTensor:$init, AnyRankedTensor:$halt_weight, AnyRankedTensor:$halt_bias,
                   I64Attr:$max_steps, F32Attr:$threshold);
  let results = (outs AnyRankedTensor:$hidden, AnyRankedTensor:$ponder, AnyRankedTensor:$steps, AnyRankedTensor:$iterations);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$init `,` $halt_weight `,` $halt_bias attr-dict `:` functional-type(operands, results) $body";
  let hasVerifier = 1;
}

def Kiln_LoopOp : Kiln_Op<"loop", []> {
  let summary = "a loop with one carried tensor, run on the host until the body says stop";
  let description = [{
    The body's block arguments are the carried value (`init` on the first iteration) and the
    step number (tensor<1xi32>, from 0). It yields a flag (tensor<1xi32>) and the next carried
    value; the loop stops after a step whose flag is 0, or after `max_steps` steps. The result
    is the last value yielded. The flag is the one host decision per step.

    ```mlir
    %r = kiln.loop %c0 {max_steps = 8 : i64} : (tensor<?x132xf32>) -> tensor<?x132xf32> {
    ^bb0(%c: tensor<?x132xf32>, %t: tensor<1xi32>):
      ...
      kiln.yield %flag, %next : tensor<1xi32>, tensor<?x132xf32>
    }
    ```
  }];
  let arguments = (ins AnyRankedTensor:$init, I64Attr:$max_steps);
  let results = (outs AnyRankedTensor:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$init attr-dict `:` functional-type(operands, results) $body";
  let hasVerifier = 1;
}

def Kiln_YieldOp : Kiln_Op<"yield", [Pure, Terminator, ParentOneOf<["RecurrentOp", "LoopOp"]>]> {
  let summary = "the end of a recurrent step or loop body: its next state (and a loop's flag)";
  let arguments = (ins Variadic<AnyRankedTensor>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
}

// ACT bookkeeping on the carried tensor [L, 2d + 4]: columns [0, d) the state, [d, 2d) the
// weighted output, then the halting sum h, the remainder r, the update count n and the number of
// steps run so far (every row the same: each act_update writes its step + 1).
def Kiln_ActInitOp : Kiln_Op<"act_init", [Pure], "Act", ["buildGradient"]> {
  let summary = "the ACT carry for a first state: state = x, output 0, h = r = n = 0, no step run";
  let description = [{
    ```mlir
    %c = kiln.act_init %x : (tensor<?x64xf32>) -> tensor<?x132xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$x);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_ActInputOp : Kiln_Op<"act_input", [Pure], "Act", ["getCost", "buildGradient"]> {
  let summary = "a step's input: the carried state + the position signal + the timestep signal";
  let description = [{
    ```mlir
    %x = kiln.act_input %c, %pos, %t : (tensor<?x132xf32>, tensor<?x64xf32>, tensor<1xi32>) -> tensor<?x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$carry, AnyRankedTensor:$positions, AnyRankedTensor:$step);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_ActUpdateOp : Kiln_Op<"act_update", [Pure], "Act", ["getKernelAttrs", "getCost", "buildGradient"]> {
  let summary = "one ACT step: halting probabilities, weights, the weighted output and the state";
  let description = [{
    carry [L, 2d+4], x (the step's input) and y (its output) [L, d], halt weight [d], halt bias
    [1], step [1] i32 -> the next carry. See kiln.recurrent for the rule.

    ```mlir
    %n = kiln.act_update %c, %x, %y, %w, %b, %t {max_steps = 8 : i64, threshold = 0.99 : f32} : (tensor<?x132xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<64xf32>, tensor<1xf32>, tensor<1xi32>) -> tensor<?x132xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$carry, AnyRankedTensor:$x, AnyRankedTensor:$y, AnyRankedTensor:$halt_weight,
                   AnyRankedTensor:$halt_bias, AnyRankedTensor:$step, I64Attr:$max_steps, F32Attr:$threshold);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_ActRunningOp : Kiln_Op<"act_running", [Pure], "Act", ["inferSeqLengths"]> {
  let tiling = "None";
  let summary = "1 when some position has not halted (h < 1), else 0: the loop's flag";
  let description = [{
    ```mlir
    %f = kiln.act_running %c : (tensor<?x132xf32>) -> tensor<1xi32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$carry);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

def Kiln_ActOutputOp : Kiln_Op<"act_output", [Pure], "Act", ["getKernelAttrs", "inferSeqLengths", "buildGradient"]> {
  let summary = "a result of the ACT carry: hidden [L, d], ponder [L] (n + r), steps [L] i32 or iterations [1] i32";
  let description = [{
    ```mlir
    %p = kiln.act_output %c {field = #kiln.act_field<ponder>} : (tensor<?x132xf32>) -> tensor<?xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$carry, Kiln_ActFieldAttr:$field);
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
}

#endif  // KILN_LOOP_OPS
