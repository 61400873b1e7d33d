"""mirax.scipy.stats: jax.scipy.stats's distributions as submodules (`norm.logpdf`,
`gamma.cdf`, ...), written on mirax.numpy and mirax.scipy.special so every function
differentiates (in every float argument) and runs under jit and vmap; plus sem, mode and
rankdata."""
from mirax.scipy.stats import (  # noqa: F401
    bernoulli, beta, betabinom, binom, cauchy, chi2, dirichlet, expon, gamma, gennorm, geom,
    gumbel_l, gumbel_r, laplace, logistic, multinomial, multivariate_normal, nbinom, norm,
    pareto, poisson, t, truncnorm, uniform, vonmises, wrapcauchy)
from mirax.scipy.stats._core import ModeResult, mode, rankdata, sem  # noqa: F401
