// Every admin page (templates/admin/base_site.html): names what Django's own admin
// widgets leave unnamed, once their scripts have built them (axe-core, WCAG 2.2 AA).
// - The many-to-many filter's search icons carry aria-label on a <span> with no role
//   (aria-prohibited-attr): they are images, so they get role="img".
// - A date-and-time field's two boxes have no label of their own (the field's label
//   points at neither): each is named "<field label> date" and "<field label> time".
function nameAdminWidgets() {
  for (const icon of document.querySelectorAll(".search-label-icon[aria-label]:not([role])")) {
    icon.setAttribute("role", "img");
  }
  for (const box of document.querySelectorAll("p.datetime")) {
    const row = box.closest(".form-row, td") || box.parentElement;
    const caption = row && row.querySelector("label, legend");
    const name = caption ? caption.textContent.replace(/:\s*$/, "").trim() : "";
    const inputs = box.querySelectorAll("input:not([type=hidden])");
    ["date", "time"].forEach((part, i) => {
      const input = inputs[i];
      if (input && input.labels.length === 0 && !input.hasAttribute("aria-label")) {
        input.setAttribute("aria-label", `${name} ${part}`.trim());
      }
    });
  }
}

// Django's widgets build themselves on "load"; this listener is added after theirs.
window.addEventListener("load", nameAdminWidgets);
