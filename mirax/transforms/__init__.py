"""transforms: the public transforms (grad / value_and_grad / vjp, jvp / linearize, vmap,
jit, custom_jvp / custom_vjp, checkpoint, jacfwd / jacrev / hessian / hvp, eval_shape),
thin faces over the interpreters (mirax/interpreters/) and the primitives (mirax/ops/).
`jit` stages into a Graph and runs it through the `call` primitive, whose executable the
runtime makes with the compiler's pipeline and the arguments' backend."""
