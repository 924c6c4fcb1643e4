"""The images a real-runtime row imports, built here with buildah from Debian packages (no registry).

``python -m e2e.images`` builds what is missing and prints each image's tarball, reference and sizes;
``keys`` says what each image is built from, ``build`` how.
"""
