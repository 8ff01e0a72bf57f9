# A stand-in for Spack, just enough to load ports/spack/package.py (test_spack_recipe.py).
