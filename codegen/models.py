"""Kind schema -> Pydantic v2 model source, through datamodel-code-generator.

The generator is pinned exactly in pyproject.toml and run without a timestamp or an
external formatter, so the same schema always yields the same bytes.
"""

from __future__ import annotations

import json

from datamodel_code_generator import InputFileType, PythonVersion, generate
from datamodel_code_generator.enums import DataModelType

from codegen.jsonschema import Schema, model_view

__all__ = ["model_source"]


def model_source(schema: Schema, header: str) -> str:
    """The module text for one kind: snake_case attributes, camelCase aliases, enums."""
    out = generate(
        json.dumps(model_view(schema), sort_keys=True),
        input_file_type=InputFileType.JsonSchema,
        output_model_type=DataModelType.PydanticV2BaseModel,
        target_python_version=PythonVersion.PY_311,
        snake_case_field=True,
        use_title_as_name=True,
        use_annotated=True,
        field_constraints=True,
        use_field_description=True,
        allow_population_by_field_name=True,
        set_default_enum_member=True,
        use_standard_collections=True,
        use_union_operator=True,
        # Identical shapes (the image settings of exporter and runtime) become one model.
        reuse_model=True,
        # A round trip through a model must never drop fields it does not know.
        extra_fields="allow",
        disable_timestamp=True,
        custom_file_header=header,
        formatters=[],
    )
    if not isinstance(out, str):
        raise TypeError("datamodel-code-generator returned several modules for one schema")
    return out if out.endswith("\n") else out + "\n"
