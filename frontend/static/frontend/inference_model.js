// Inference tab: the model picker. A catalog model shows its published shape (a mixture of
// experts' MoE fields too) in the custom fields, read-only and not sent (the name is);
// "Custom shape" makes them editable again, starting from the last model's shape.
(function () {
  const picker = document.querySelector("select[data-model-picker]");
  const custom = document.querySelector("[data-custom-shape]");
  const dataNode = document.getElementById("inference-model-catalog");
  if (!picker || !custom || !dataNode) { return; }
  const shapes = {};
  JSON.parse(dataNode.textContent).forEach(function (entry) { shapes[entry.name] = entry.shape; });
  const controls = document.querySelectorAll(
    "[data-custom-shape] input, [data-custom-shape] select, [data-moe-shape] input, [data-moe-shape] select"
  );
  const note = document.querySelector("[data-catalog-note]");

  function apply() {
    const shape = shapes[picker.value];
    controls.forEach(function (control) {
      if (shape && control.type === "checkbox") { control.checked = Boolean(shape[control.name]); }
      else if (shape && control.name in shape) { control.value = shape[control.name]; }
      else if (shape && control.tagName === "INPUT") { control.value = ""; }
      control.disabled = Boolean(shape);  // disabled fields are not submitted
    });
    custom.toggleAttribute("data-from-catalog", Boolean(shape));
    if (note) { note.hidden = !shape; }
  }

  picker.addEventListener("change", apply);
  apply();
})();
