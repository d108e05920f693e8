"""Model builders, one module per formulation; each makes a solver-neutral LinearModel once."""
