"""The API's shapes and rules on plain dicts: objects, constants, names, quantities, semver, field
errors, served versions, draxr's annotations, and the validation the webhook and the CLI share."""
