/** The workspace packages are consumed as their published builds (`dist`). */
export default { typescript: { ignoreBuildErrors: false } };
