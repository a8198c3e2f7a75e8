/** A page script (a string, run by page.evaluate) listing visible text below WCAG AA contrast: 4.5:1, 3:1 for large text. Colours are blended through transparent backgrounds and opacity. */
export const CONTRAST_CHECK = String.raw`(() => {
  const parse = (c) => { const m = c.match(/rgba?\(([^)]+)\)/); if (!m) return [0,0,0,0]; const p = m[1].split(/[ ,\/]+/).filter(Boolean).map(Number); return [p[0],p[1],p[2],p.length>3?p[3]:1]; };
  const lum = ([r,g,b]) => { const f = (v) => { v/=255; return v<=0.03928? v/12.92 : ((v+0.055)/1.055)**2.4; }; return 0.2126*f(r)+0.7152*f(g)+0.0722*f(b); };
  const blend = (top, bottom) => { const a = top[3]; return [top[0]*a+bottom[0]*(1-a), top[1]*a+bottom[1]*(1-a), top[2]*a+bottom[2]*(1-a), 1]; };
  const bgOf = (el) => { const layers = []; for (let e = el; e; e = e.parentElement) { const c = parse(getComputedStyle(e).backgroundColor); if (c[3] > 0) layers.push(c); if (c[3] >= 1) break; } let bg = [255,255,255,1]; for (const l of layers.reverse()) bg = blend(l, bg); return bg; };
  const opacityOf = (el) => { let o = 1; for (let e = el; e; e = e.parentElement) o *= Number(getComputedStyle(e).opacity); return o; };
  const out = [];
  for (const el of document.querySelectorAll('body *')) {
    if (!(el instanceof HTMLElement) || el.closest('[hidden]')) continue;
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own) continue;
    const r = el.getBoundingClientRect(); if (r.width === 0 || r.height === 0) continue;
    const st = getComputedStyle(el);
    const bg = bgOf(el);
    let fg = parse(st.color); fg = blend([fg[0],fg[1],fg[2],fg[3]*opacityOf(el)], bg);
    const [l1,l2] = [lum(fg), lum(bg)].sort((a,b)=>b-a);
    const ratio = (l1+0.05)/(l2+0.05);
    const size = parseFloat(st.fontSize); const bold = Number(st.fontWeight) >= 700;
    const need = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
    if (ratio < need) out.push(el.tagName.toLowerCase() + '.' + el.className + ' "' + el.textContent.trim().slice(0, 30) + '" ' + ratio.toFixed(2) + ':1 < ' + need);
  }
  return out;
})()
`;
