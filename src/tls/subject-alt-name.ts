/**
 * A certificate's subjectAltName, read once for the certificate store (which names a certificate
 * serves: cert-pair.ts) and for doctor (cert-info.ts). Node renders subjectAltName as `DNS:a.example, DNS:b.example, IP Address:127.0.0.1`; a value
 * holding a comma, quote or other special character is written as a JSON string
 * (`DNS:"a, DNS:b"`, Node's fix for CVE-2021-44532), so a name cannot smuggle in a second entry.
 */
export function parseSubjectAltName(text: string | undefined): { dns: string[]; ip: string[] } {
  const dns: string[] = [];
  const ip: string[] = [];
  if (text === undefined) return { dns, ip };
  let i = 0;
  while (i < text.length) {
    const colon = text.indexOf(':', i);
    if (colon < 0) break;
    const kind = text.slice(i, colon);
    let value: string;
    let end: number;
    if (text[colon + 1] === '"') {
      // A JSON string: find its closing quote, skipping escaped characters.
      let j = colon + 2;
      while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      end = j + 1;
      try {
        value = JSON.parse(text.slice(colon + 1, end)) as string;
      } catch {
        value = text.slice(colon + 2, j);
      }
    } else {
      const comma = text.indexOf(', ', colon + 1);
      end = comma < 0 ? text.length : comma;
      value = text.slice(colon + 1, end);
    }
    if (kind === 'DNS') dns.push(value);
    else if (kind === 'IP Address') ip.push(value);
    i = text.startsWith(', ', end) ? end + 2 : end;
  }
  return { dns, ip };
}
